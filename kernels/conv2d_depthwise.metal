// 2-D depthwise convolution (one input channel per group, channel multiplier 1) with a
// kernel of at most 3 x 3, unit stride and dilation: MobileNet-style layers, fast.
// Other depthwise shapes run on conv2d_fwd_dw and the direct backward kernels.
//
// conv2d_dw3      Y[n, c] = X[n, c] (*) W[c] (+ bias), or with `flip` the input
//                 gradient: dX[n, c] = dY[n, c] (*) flipped W[c] (a stride-1 depthwise
//                 convolution's input gradient is the convolution of dY with the
//                 flipped kernel and padding K - 1 - pad). A thread computes p.rows
//                 rows x DW_P columns of one channel, a row at a time (the host picks
//                 p.rows per device: few heavy threads suit the simulator, many light
//                 ones a GPU). It reads X in place (any strides): a tile whose input
//                 columns lie inside X reads X's rows directly (rows outside X add
//                 nothing); a tile at a column border reads through a ring of 4 local
//                 window rows, zero outside X (the padding), each filled ahead of its
//                 first use (a just-written row read back shifted stalls on store
//                 forwarding). (No padded copy of X first: that moved as many
//                 bytes as the convolution itself, and took scratch.)
//                 Grid: x = ceil(OH / p.rows) * ceil(OW / DW_P), y = C, z = N.
// conv2d_dw3_bwd_w  the weight gradient: per channel and chunk of DW_RW output rows of
//                 one image, the KH x KW sums of dY (unit-stride rows) * X over
//                 DW_P-wide column tiles, X read in place (directly inside X; at a
//                 column border through the chunk's whole window, copied before it is
//                 read), into a float workspace [chunk][C][KH][KW] that conv2d_sum_chunks
//                 (conv2d_tiled.metal) adds up. Grid: x = C, y = ceil(OH / DW_RW), z = N.
// Host launchers: backend/ops/conv2d/conv2d_depthwise.cpp.
#include <metal_stdlib>
using namespace metal;

// conv2d_dw3_bwd_w: chunks of DW_RW rows, which measured best on the simulator (17%
// faster than 28); its chunks are also its parallelism.
#define DW_RW 7
#define DW_P 8
// See conv2d_tiled.metal (UNROLL_POSITIONS there).
#if defined(__METAL_VERSION__)
#define UNROLL _Pragma("unroll")
#define UNROLL_COLUMNS _Pragma("unroll")
#else
#define UNROLL _Pragma("GCC unroll 16")
#define UNROLL_COLUMNS _Pragma("GCC unroll 1")
#endif

// Mirrored by backend/ops/conv2d/conv2d_tiled_params.h.
struct Conv2dDwParams {
  long N, C;
  long OH, OW;            // output
  long KH, KW;            // <= 3
  long y_s[4], w_s[4];
  long b_s, has_bias, flip;
  long H, W, pad_h, pad_w;  // X as given, and its padding
  long rows;                // conv2d_dw3: output rows per thread
  long x_s[4];
};

// One row of a thread's input window: X[ih][iw0 .. iw0 + DW_P + 2), zero outside X
// (the padding). Rows wholly inside X with unit stride (most of them) load without
// tests.
template <typename T>
inline void load_window_row(thread float* win, const device T* xc, long ih, long iw0, constant Conv2dDwParams& p) {
  if (ih < 0 || ih >= p.H) {
    UNROLL for (int j = 0; j < DW_P + 2; ++j) win[j] = 0.0f;
    return;
  }
  const device T* row = xc + ih * p.x_s[2];
  if (iw0 >= 0 && iw0 + DW_P + 2 <= p.W && p.x_s[3] == 1) {
    UNROLL for (int j = 0; j < DW_P + 2; ++j) win[j] = float(row[iw0 + j]);
    return;
  }
  // At a column border: zeros, then the columns inside X, a contiguous copy when X's
  // rows are (one test per element was 15% slower on the simulator).
  const long j0 = max(0L, -iw0), j1 = min(long(DW_P + 2), p.W - iw0);
  UNROLL for (int j = 0; j < DW_P + 2; ++j) win[j] = 0.0f;
  if (p.x_s[3] == 1) {
    const long n = j1 - j0;
    const device T* src = row + iw0 + j0;
    thread float* dst = win + j0;
    for (long j = 0; j < n; ++j) dst[j] = float(src[j]);
  } else {
    for (long j = j0; j < j1; ++j) win[j] = float(row[(iw0 + j) * p.x_s[3]]);
  }
}

// The multiply-adds of one input row of a window, `row` pointing at its first column
// (X itself, or a local copy): acc[j] += sum over kw of wk[kw] * row[j + kw] (forward),
// and part[kw][j] += yv[j] * row[j + kw] (weight gradient).
template <typename Row>
inline void add_row_taps(thread float* acc, const thread float* wk, Row row) {
  UNROLL for (int kw = 0; kw < 3; ++kw)
    UNROLL_COLUMNS for (int j = 0; j < DW_P; ++j) acc[j] += wk[kw] * float(row[j + kw]);
}

template <typename Row>
inline void add_row_products(thread float (*part)[DW_P], const thread float* yv, Row row) {
  UNROLL for (int kw = 0; kw < 3; ++kw)
    UNROLL_COLUMNS for (int j = 0; j < DW_P; ++j) part[kw][j] += yv[j] * float(row[j + kw]);
}

template <typename T>
kernel void conv2d_dw3(device T* y [[buffer(0)]],
                       const device T* x [[buffer(1)]],
                       const device T* w [[buffer(2)]],
                       const device T* bias [[buffer(3)]],
                       constant Conv2dDwParams& p [[buffer(4)]],
                       uint3 gid [[thread_position_in_grid]]) {
  const long tiles_w = (p.OW + DW_P - 1) / DW_P;
  if (long(gid.x) >= ((p.OH + p.rows - 1) / p.rows) * tiles_w) return;
  const long row_tile = gid.x / tiles_w;
  const long oh0 = row_tile * p.rows;
  const long ow0 = (gid.x - row_tile * tiles_w) * DW_P;
  const long c = gid.y, n = gid.z;

  float wk[3][3];
  UNROLL for (int kh = 0; kh < 3; ++kh)
    UNROLL for (int kw = 0; kw < 3; ++kw) {
      const long sh = p.flip ? p.KH - 1 - kh : kh, sw = p.flip ? p.KW - 1 - kw : kw;
      wk[kh][kw] = kh < p.KH && kw < p.KW ? float(w[c * p.w_s[0] + sh * p.w_s[2] + sw * p.w_s[3]]) : 0.0f;
    }
  const device T* xc = x + n * p.x_s[0] + c * p.x_s[1];
  const long iw0 = ow0 - p.pad_w;
  // Columns inside X: each output row reads X's rows directly (rows outside X add
  // nothing). At a column border: through the ring below.
  const bool inside = iw0 >= 0 && iw0 + DW_P + 2 <= p.W && p.x_s[3] == 1;
  const float b = p.has_bias ? float(bias[c * p.b_s]) : 0.0f;
  device T* yc = y + n * p.y_s[0] + c * p.y_s[1];
  const long nr = min(p.rows, p.OH - oh0), nj = min(long(DW_P), p.OW - ow0);
  // Parameters the loop uses, read once (the host compiler cannot tell that the
  // stores to Y leave them unchanged).
  const long H = p.H, xs2 = p.x_s[2], ys2 = p.y_s[2], ys3 = p.y_s[3];
  const bool whole_rows = nj == DW_P && ys3 == 1;
  // At a column border: window row i (zero outside X) in ring[i % 4], loaded two
  // iterations before its first read (shifted reads of a just-written row stall on
  // store forwarding).
  float ring[4][DW_P + 2];
  if (!inside) {
    UNROLL for (int i = 0; i < 4; ++i) load_window_row(ring[i], xc, oh0 - p.pad_h + i, iw0, p);
  }
  for (long r = 0; r < nr; ++r) {
    const long ih = oh0 + r - p.pad_h;  // the input row of tap kh = 0
    float acc[DW_P];
    UNROLL for (int j = 0; j < DW_P; ++j) acc[j] = 0.0f;
    if (inside && ih >= 0 && ih + 2 < H) {  // all three rows inside X: no tests
      const device T* row = xc + ih * xs2 + iw0;
      UNROLL for (int kh = 0; kh < 3; ++kh) add_row_taps(acc, wk[kh], row + kh * xs2);
    } else if (inside) {
      UNROLL for (int kh = 0; kh < 3; ++kh)
        if (ih + kh >= 0 && ih + kh < H) add_row_taps(acc, wk[kh], xc + (ih + kh) * xs2 + iw0);
    } else {
      UNROLL for (int kh = 0; kh < 3; ++kh) add_row_taps(acc, wk[kh], ring[(r + kh) % 4]);
      // Row r's slot now takes window row r + 4 (first read at iteration r + 2).
      load_window_row(ring[r % 4], xc, ih + 4, iw0, p);
    }
    device T* yr = yc + (oh0 + r) * ys2 + ow0 * ys3;
    if (whole_rows) {
      UNROLL for (int j = 0; j < DW_P; ++j) yr[j] = T(acc[j] + b);
    } else {  // the row's last tile, or strided rows
      for (long j = 0; j < nj; ++j) yr[j * ys3] = T(acc[j] + b);
    }
  }
}

template <typename T>
kernel void conv2d_dw3_bwd_w(device float* partial [[buffer(0)]],
                             const device T* dy [[buffer(1)]],
                             const device T* x [[buffer(2)]],
                             constant Conv2dDwParams& p [[buffer(3)]],
                             uint3 gid [[thread_position_in_grid]]) {
  const long c = gid.x, n = gid.z;
  if (c >= p.C) return;
  const long oh0 = long(gid.y) * DW_RW;
  const long nr = min(long(DW_RW), p.OH - oh0);
  float part[3][3][DW_P];
  UNROLL for (int kh = 0; kh < 3; ++kh)
    UNROLL for (int kw = 0; kw < 3; ++kw)
      UNROLL for (int j = 0; j < DW_P; ++j) part[kh][kw][j] = 0.0f;
  const device T* xc = x + n * p.x_s[0] + c * p.x_s[1];
  const device T* yc = dy + n * p.y_s[0] + c * p.y_s[1];
  for (long ow0 = 0; ow0 < p.OW; ow0 += DW_P) {
    // The tile's dY, zero past its last row and column (dY's rows are unit-stride:
    // the launcher checks).
    const long nj = p.OW - ow0;
    float yv[DW_RW][DW_P];
    UNROLL for (int r = 0; r < DW_RW; ++r)
      UNROLL for (int j = 0; j < DW_P; ++j)
        yv[r][j] = r < nr && j < nj ? float(yc[(oh0 + r) * p.y_s[2] + ow0 + j]) : 0.0f;
    // Each input row of the window once; it meets dY row r = i - kh through tap kh.
    const long iw0 = ow0 - p.pad_w;
    if (iw0 >= 0 && iw0 + DW_P + 2 <= p.W && p.x_s[3] == 1) {
      // Columns inside X: read its rows directly (rows outside X add nothing). Not
      // through a local copy: the shifted reads of a just-written copy stall on store
      // forwarding.
      UNROLL for (int i = 0; i < DW_RW + 2; ++i) {
        const long ih = oh0 - p.pad_h + i;
        if (ih < 0 || ih >= p.H) continue;
        const device T* row = xc + ih * p.x_s[2] + iw0;
        UNROLL for (int kh = 0; kh < 3; ++kh)
          if (i - kh >= 0 && i - kh < DW_RW) add_row_products(part[kh], yv[i - kh], row);
      }
      continue;
    }
    // At a column border, through a local copy with the padding's zeros, written whole
    // before it is read.
    float wins[DW_RW + 2][DW_P + 2];
    UNROLL for (int i = 0; i < DW_RW + 2; ++i) load_window_row(wins[i], xc, oh0 - p.pad_h + i, iw0, p);
    UNROLL for (int i = 0; i < DW_RW + 2; ++i) {
      UNROLL for (int kh = 0; kh < 3; ++kh)
        if (i - kh >= 0 && i - kh < DW_RW) add_row_products(part[kh], yv[i - kh], wins[i]);
    }
  }
  // [chunk][C][KH][KW], chunk = n * ceil(OH / DW_RW) + gid.y.
  const long chunk = n * ((p.OH + DW_RW - 1) / DW_RW) + gid.y;
  device float* out = partial + (chunk * p.C + c) * p.KH * p.KW;
  for (long kh = 0; kh < p.KH; ++kh)
    for (long kw = 0; kw < p.KW; ++kw) {
      float s = 0.0f;
      for (int j = 0; j < DW_P; ++j) s += part[kh][kw][j];
      out[kh * p.KW + kw] = s;
    }
}

template [[host_name("conv2d_dw3_float")]] kernel decltype(conv2d_dw3<float>) conv2d_dw3<float>;
template [[host_name("conv2d_dw3_half")]] kernel decltype(conv2d_dw3<half>) conv2d_dw3<half>;
template [[host_name("conv2d_dw3_bfloat")]] kernel decltype(conv2d_dw3<bfloat>) conv2d_dw3<bfloat>;
template [[host_name("conv2d_dw3_bwd_w_float")]] kernel decltype(conv2d_dw3_bwd_w<float>) conv2d_dw3_bwd_w<float>;
template [[host_name("conv2d_dw3_bwd_w_half")]] kernel decltype(conv2d_dw3_bwd_w<half>) conv2d_dw3_bwd_w<half>;
template [[host_name("conv2d_dw3_bwd_w_bfloat")]] kernel decltype(conv2d_dw3_bwd_w<bfloat>) conv2d_dw3_bwd_w<bfloat>;
