// 2-D convolution, the fast paths: register-tiled kernels over operands laid out the
// way they read them (kernels/conv2d_layout.metal makes those layouts).
//
// conv2d_tiled        Y = conv(X, W) (+ bias), for unit horizontal stride. Needs
//   * X with unit-stride rows and every position a tile reads inside X's buffer: the
//     launcher pads X into a workspace first (conv2d_pad_input) unless X needs no
//     padding and is large enough for a whole tile;
//   * W packed by conv2d_pack_weight (or prepacked once: metalx.nn.PrepackedConv2d):
//       wp[((tile * KH + kh) * KW + kw) * cx_g + ic][TILE_C]     float32
//     where `tile` numbers the blocks of TILE_C output channels of all groups (a
//     group's last block is padded with zero weights), so the TILE_C weights of one
//     tap and input channel are one contiguous read, the same for every thread of the
//     block (on a GPU, a broadcast load for the whole SIMD group).
//   Each thread accumulates TILE_C output channels x TILE_P consecutive output
//   positions in registers: per input channel and tap, TILE_P inputs and TILE_C
//   weights feed TILE_C * TILE_P multiply-adds. Positions run along one of two lines:
//   * flat (p.flat, unit vertical stride): the whole image, q = oh * pitch + ow with
//     pitch = X's row stride x_s[2], so that a tile's inputs for one tap are TILE_P
//     consecutive elements of X even across rows; the positions ow >= OW between rows
//     are computed from neighbouring rows' inputs and not stored. Small images then
//     fill whole tiles (14 x 14 outputs waste 2 of every 16 positions, not 18 of 32);
//   * rows (!p.flat): one output row per line, any vertical stride.
//   A line's last tile ends at the line's end (overlapping the one before it and
//   recomputing the shared outputs identically); a line shorter than a tile reads past
//   it (the launcher leaves room) and drops the extra outputs.
//   Grid: x = slots of TILE_SLOT positions (flat: ceil(Q / TILE_SLOT), Q = (OH - 1) *
//   pitch + OW; rows: OH * ceil(OW / TILE_SLOT)), y = tiles of all groups, z = N. The
//   host sizes grids in slots, not tiles, so TILE_P can differ per target: a thread
//   whose slot does not start a tile returns at once.
//   The input gradient of a stride-1 convolution is the same computation (dY
//   convolved with the transposed, flipped weight, which conv2d_pack_weight also
//   packs), and so is a stride-1 transposed convolution.
// conv2d_tiled_bwd_w  dW, from dY and a channels-last padded copy of X (below).
// conv2d_taps_bwd_w   dW when a group has fewer than TILE_C channels on a side (a
//                     stem's 3 inputs), from dY and an NCHW padded copy of X.
// conv2d_sum_chunks   adds the two weight-gradient kernels' partial sums into dW.
// No threadgroup memory and no barriers: on the simulator the kernels run as plain
// loops. Host launchers: backend/ops/conv2d/conv2d_tiled.cpp.
#include <metal_stdlib>
using namespace metal;

// Mirrored by backend/ops/conv2d/conv2d_tiled_params.h.
struct Conv2dTiledParams {
  long N, Cx, H, W;          // X as the kernel reads it (padded: H, W include the pad)
  long Cy, OH, OW;
  long KH, KW;
  long stride_h, dil_h, dil_w;  // the horizontal stride is 1
  long cx_g, cy_g, tiles_g;  // channels per group, TILE_C blocks per group
  long x_s[3];               // strides of X (n, c, h); w is unit-stride
  long y_s[4];               // strides of Y (n, c, h, w)
  long b_s;                  // stride of the bias
  long has_bias;
  long flat;                 // 1: a line per image, rows x_s[2] apart; 0: a line per output row
};

#define TILE_C 8  // also in conv2d_layout.metal
// Output positions per thread. Apple GPUs: 8 x 8 accumulators, what a thread holds
// comfortably next to its addresses. The simulator's AVX-512 build: 8 x 32, two
// 16-float registers per output channel, so each weight broadcast feeds two
// multiply-adds (with 8 x 8 the broadcasts, not the multiply-adds, bound the loop;
// measured 50 -> 97 GFLOP/s per core); narrower builds have 16 registers and keep 8.
#if !defined(METALSIM_VECTOR_BYTES) || METALSIM_VECTOR_BYTES < 64
#define TILE_P 8
#else
#define TILE_P 32
#endif
#define TILE_SLOT 8  // the grid's unit, kConvTileSlot on the host; divides every TILE_P
// Full unrolling keeps the accumulators in registers (GCC, which compiles kernels for
// the simulator, does not unroll nested loops fully at -O2 unless asked).
#if defined(__METAL_VERSION__)
#define UNROLL _Pragma("unroll")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif
// The loop over a tile's positions in the multiply-adds. On the simulator's AVX2 and
// AVX-512 builds it stays a loop: GCC's loop vectoriser then makes it whole registers
// of positions, each weight one broadcast load (measured 64 and 101 GFLOP/s per core).
// Fully unrolled, its SLP vectoriser loads a tap's TILE_C weights as one vector and
// splats every lane with two shuffles, which bound the loop (48-50 GFLOP/s); for the
// baseline (SSE2) build that is still the better of the two.
#if defined(__METAL_VERSION__)
#define UNROLL_POSITIONS _Pragma("unroll")
#elif METALSIM_VECTOR_BYTES >= 32
#define UNROLL_POSITIONS _Pragma("GCC unroll 1")
#else
#define UNROLL_POSITIONS UNROLL
#endif

template <typename T>
kernel void conv2d_tiled(device T* y [[buffer(0)]],
                         const device T* x [[buffer(1)]],
                         const device float* wp [[buffer(2)]],
                         const device T* bias [[buffer(3)]],
                         constant Conv2dTiledParams& p [[buffer(4)]],
                         uint3 gid [[thread_position_in_grid]]) {
  const long slots_per_tile = TILE_P / TILE_SLOT;
  long line_len, q0, x_off, y_off;
  const long pitch = p.x_s[2];
  if (p.flat) {
    line_len = (p.OH - 1) * pitch + p.OW;
    q0 = long(gid.x) * TILE_SLOT;
    if (q0 >= line_len || gid.x % slots_per_tile != 0) return;
    if (q0 + TILE_P > line_len && line_len >= TILE_P) q0 = line_len - TILE_P;
    x_off = q0;
    y_off = 0;
  } else {
    const long slots_w = (p.OW + TILE_SLOT - 1) / TILE_SLOT;
    if (long(gid.x) >= p.OH * slots_w) return;
    const long oh = gid.x / slots_w;
    const long s = gid.x - oh * slots_w;
    if (s % slots_per_tile != 0) return;
    line_len = p.OW;
    q0 = s * TILE_SLOT;
    if (q0 + TILE_P > line_len && line_len >= TILE_P) q0 = line_len - TILE_P;
    x_off = oh * p.stride_h * p.x_s[2] + q0;
    y_off = oh * p.y_s[2] + q0 * p.y_s[3];
  }
  const long tile = gid.y;
  const long g = tile / p.tiles_g;
  const long oc0 = g * p.cy_g + (tile - g * p.tiles_g) * TILE_C;
  const long nc = min(long(TILE_C), (g + 1) * p.cy_g - oc0);
  const long n = gid.z;

  float acc[TILE_C][TILE_P];
  UNROLL for (int o = 0; o < TILE_C; ++o)
    UNROLL for (int j = 0; j < TILE_P; ++j) acc[o][j] = 0.0f;

  const long taps = p.KH * p.KW;
  const device float* wt = wp + tile * taps * p.cx_g * TILE_C;
  const device T* xn = x + n * p.x_s[0] + g * p.cx_g * p.x_s[1] + x_off;
  const long xcs = p.x_s[1];
  for (long kh = 0; kh < p.KH; ++kh) {
    for (long kw = 0; kw < p.KW; ++kw) {
      const device T* xt = xn + kh * p.dil_h * p.x_s[2] + kw * p.dil_w;
      for (long ic = 0; ic < p.cx_g; ++ic) {
        UNROLL_POSITIONS for (int j = 0; j < TILE_P; ++j) {
          const float xv = float(xt[j]);
          UNROLL for (int o = 0; o < TILE_C; ++o) acc[o][j] += wt[o] * xv;
        }
        xt += xcs;
        wt += TILE_C;
      }
    }
  }

  // Where each position goes, and whether it is an output at all (past the line's
  // end, or between rows of a flat line, it is not).
  long y_at[TILE_P];
  bool keep[TILE_P];
  UNROLL for (int j = 0; j < TILE_P; ++j) {
    const long q = q0 + j;
    if (p.flat) {
      const long oh = q / pitch, ow = q - (q / pitch) * pitch;
      keep[j] = q < line_len && ow < p.OW;
      y_at[j] = oh * p.y_s[2] + ow * p.y_s[3];
    } else {
      keep[j] = q < line_len;
      y_at[j] = y_off + j * p.y_s[3];
    }
  }
  device T* yo = y + n * p.y_s[0] + oc0 * p.y_s[1];
  // Unrolled with constant indices so that acc never needs an address (it stays in
  // registers); tiles cut by the channel end mask their stores too.
  UNROLL for (int o = 0; o < TILE_C; ++o) {
    const float b = p.has_bias && o < nc ? float(bias[(oc0 + o) * p.b_s]) : 0.0f;
    device T* yr = yo + o * p.y_s[1];
    UNROLL for (int j = 0; j < TILE_P; ++j)
      if (o < nc && keep[j]) yr[y_at[j]] = T(acc[o][j] + b);
  }
}

// conv2d_tiled_bwd_w: dW = the weight gradient of Y = conv(X, W), from dY and X as a
// channels-last, padded copy Xt[n][h][w][c] (conv2d_pad_input with channels_last), so
// every tap is in bounds and a tile's TILE_I input channels are one contiguous read.
// A thread accumulates TILE_C output channels x TILE_I input channels of one tap over
// the output rows [row0, row1) of the flattened (n, oh) range its grid z selects (a
// chunk: chunks keep a threadgroup's data in cache and give a GPU enough threads). The
// sums go to a float workspace [chunk][Cy][cx_g][KH][KW] that conv2d_sum_chunks adds
// up into dW. Grid: x = ceil(cx_g / TILE_SLOT) * KH * KW (input channels in slots, as
// conv2d_tiled counts positions: TILE_I differs per target), y = tiles, z = chunks.
struct Conv2dWeightGradParams {
  long N, Cx, Hp, Wp;        // Xt: channels-last, padded
  long Cy, OH, OW;
  long KH, KW;
  long stride_h, stride_w, dil_h, dil_w;
  long cx_g, cy_g, tiles_g;
  long rows_per_chunk;       // of the N * OH output rows
  long y_s[4];               // strides of dY
  long w_s[4];               // strides of dW (conv2d_sum_chunks)
  long chunks;
};

// Input channels per thread: TILE_P's counterpart (the contiguous, vectorised dimension).
#define TILE_I TILE_P
// The loop over a tile's input channels stays a loop on every simulator build: GCC's
// loop vectoriser makes it whole registers of channels, each dY value broadcast once
// per pixel (fully unrolled, its SLP vectoriser measured 3.5x slower on the baseline
// build and 11x on AVX-512).
#if defined(__METAL_VERSION__)
#define UNROLL_INPUTS _Pragma("unroll")
#else
#define UNROLL_INPUTS _Pragma("GCC unroll 1")
#endif

template <typename T>
kernel void conv2d_tiled_bwd_w(device float* partial [[buffer(0)]],
                               const device T* dy [[buffer(1)]],
                               const device T* xt [[buffer(2)]],
                               constant Conv2dWeightGradParams& p [[buffer(3)]],
                               uint3 gid [[thread_position_in_grid]]) {
  const long taps = p.KH * p.KW;
  const long slots_i = (p.cx_g + TILE_SLOT - 1) / TILE_SLOT;
  if (long(gid.x) >= slots_i * taps) return;
  const long si = gid.x / taps;
  const long tap = gid.x - si * taps;
  if (si % (TILE_I / TILE_SLOT) != 0) return;
  const long kh = tap / p.KW, kw = tap - (tap / p.KW) * p.KW;
  const long tile = gid.y;
  const long g = tile / p.tiles_g;
  // A group's last tile ends at the group's end, overlapping the one before it (their
  // shared weights are computed identically): the launcher runs this kernel only when
  // both channel counts per group are at least TILE_C (= TILE_SLOT), so every output
  // tile is full. A group with fewer than TILE_I input channels reads on into the next
  // channels (the launcher leaves room after Xt) and drops those sums.
  const long ocg0 = min((tile - g * p.tiles_g) * TILE_C, p.cy_g - TILE_C);  // within the group
  long icg0 = si * TILE_SLOT;
  if (icg0 + TILE_I > p.cx_g && p.cx_g >= TILE_I) icg0 = p.cx_g - TILE_I;
  const long ni = min(long(TILE_I), p.cx_g - icg0);
  const long row0 = long(gid.z) * p.rows_per_chunk;
  const long row1 = min(p.N * p.OH, row0 + p.rows_per_chunk);

  float acc[TILE_C][TILE_I];
  UNROLL for (int o = 0; o < TILE_C; ++o)
    UNROLL for (int i = 0; i < TILE_I; ++i) acc[o][i] = 0.0f;

  const long ys1 = p.y_s[1], ys3 = p.y_s[3];
  const device T* yg = dy + (g * p.cy_g + ocg0) * ys1;
  const device T* xg = xt + g * p.cx_g + icg0 + (kh * p.dil_h * p.Wp + kw * p.dil_w) * p.Cx;
  const long xpix = p.stride_w * p.Cx;  // the next output pixel's input, in Xt
  for (long row = row0; row < row1; ++row) {
    const long n = row / p.OH, oh = row - (row / p.OH) * p.OH;
    const device T* yp = yg + n * p.y_s[0] + oh * p.y_s[2];
    const device T* xp = xg + (n * p.Hp + oh * p.stride_h) * p.Wp * p.Cx;
    for (long ow = 0; ow < p.OW; ++ow) {
      float yv[TILE_C];
      UNROLL for (int o = 0; o < TILE_C; ++o) yv[o] = float(yp[o * ys1]);
      UNROLL_INPUTS for (int i = 0; i < TILE_I; ++i) {
        const float xv = float(xp[i]);
        UNROLL for (int o = 0; o < TILE_C; ++o) acc[o][i] += yv[o] * xv;
      }
      yp += ys3;
      xp += xpix;
    }
  }

  // [chunk][Cy][cx_g][KH][KW], contiguous.
  device float* out = partial + ((long(gid.z) * p.Cy + g * p.cy_g + ocg0) * p.cx_g + icg0) * taps + tap;
  UNROLL for (int o = 0; o < TILE_C; ++o)
    UNROLL for (int i = 0; i < TILE_I; ++i)
      if (i < ni) out[(o * p.cx_g + i) * taps] = acc[o][i];
}

// conv2d_taps_bwd_w: the weight gradient when a group has too few input channels for
// conv2d_tiled_bwd_w (a network's stem: 1 or 3). A thread keeps TAPS_T taps (in
// row-major order; a 3x3 kernel's all) of one input channel for TAPS_OC output
// channels, so each dY value it loads feeds TAPS_T multiply-adds instead of one, and
// reads X from an NCHW padded copy (conv2d_pad_input) in which every tap is in bounds.
// Along each output row, positions go LANES at a time, lane j summing the positions
// ow = j (mod LANES) of the thread's rows [row0, row1) (a chunk, as
// conv2d_tiled_bwd_w's); the lanes are then added in a fixed tree, (0+1)+(2+3) per
// four and those four sums the same way, so every build adds in the same order. The
// simulator's AVX-512 build runs all LANES lanes at once (one register of lanes per
// tap's loop); other targets run them LANE_GROUP at a time over the same rows (fewer
// registers, the same sums).
// Output: the partial sums [chunk][Cy][cx_g][KH][KW] that conv2d_sum_chunks adds up.
// Grid: x = cx_g * ceil(KH * KW / TAPS_T), y = groups * ceil(cy_g / TAPS_OC),
// z = chunks.
#define TAPS_T 9
#define TAPS_OC 2  // written out as yr0, yr1 below
#define LANES 16
#if defined(METALSIM_VECTOR_BYTES) && METALSIM_VECTOR_BYTES >= 64
#define LANE_GROUP 16
#elif defined(METALSIM_VECTOR_BYTES) && METALSIM_VECTOR_BYTES >= 32
#define LANE_GROUP 8
#else
#define LANE_GROUP 4
#endif

template <typename T>
kernel void conv2d_taps_bwd_w(device float* partial [[buffer(0)]],
                              const device T* dy [[buffer(1)]],
                              const device T* xp [[buffer(2)]],
                              constant Conv2dWeightGradParams& p [[buffer(3)]],
                              uint3 gid [[thread_position_in_grid]]) {
  const long taps = p.KH * p.KW;
  const long tap_groups = (taps + TAPS_T - 1) / TAPS_T;
  if (long(gid.x) >= p.cx_g * tap_groups) return;
  const long ic = gid.x / tap_groups;  // within the group
  const long t0 = (gid.x - ic * tap_groups) * TAPS_T;
  const long blocks_g = (p.cy_g + TAPS_OC - 1) / TAPS_OC;
  const long g = gid.y / blocks_g;
  if (g * p.cy_g >= p.Cy) return;
  const long ocg0 = (gid.y - g * blocks_g) * TAPS_OC;  // within the group
  const long row0 = long(gid.z) * p.rows_per_chunk;
  const long row1 = min(p.N * p.OH, row0 + p.rows_per_chunk);

  // Each tap's offset in a padded plane; taps past the last read tap 0 (dropped).
  long x_at[TAPS_T];
  UNROLL for (int t = 0; t < TAPS_T; ++t) {
    const long tap = t0 + t < taps ? t0 + t : 0;
    const long kh = tap / p.KW, kw = tap - (tap / p.KW) * p.KW;
    x_at[t] = kh * p.dil_h * p.Wp + kw * p.dil_w;
  }
  // The thread's two output channels; past the group's end, channel ocg0 again (those
  // sums are dropped).
  const long y_at0 = (g * p.cy_g + ocg0) * p.y_s[1];
  const long y_at1 = ocg0 + 1 < p.cy_g ? y_at0 + p.y_s[1] : y_at0;
  const long sw = p.stride_w, ys3 = p.y_s[3];

  float sums[TAPS_OC * TAPS_T][LANES / 4];
  for (int lg0 = 0; lg0 < LANES; lg0 += LANE_GROUP) {
    // acc[o * TAPS_T + t][j]: output channel ocg0 + o, tap t0 + t, lane lg0 + j.
    float acc[TAPS_OC * TAPS_T][LANE_GROUP];
    UNROLL for (int k = 0; k < TAPS_OC * TAPS_T; ++k)
      UNROLL for (int j = 0; j < LANE_GROUP; ++j) acc[k][j] = 0.0f;
    for (long row = row0; row < row1; ++row) {
      const long n = row / p.OH, oh = row - (row / p.OH) * p.OH;
      const device T* yr0 = dy + n * p.y_s[0] + oh * p.y_s[2] + y_at0;
      const device T* yr1 = dy + n * p.y_s[0] + oh * p.y_s[2] + y_at1;
      const device T* xr = xp + ((n * p.Cx + g * p.cx_g + ic) * p.Hp + oh * p.stride_h) * p.Wp;
      long ow0 = lg0;
      if (sw == 1 && ys3 == 1) {
        // Whole lane groups of unit-stride rows: per tap, a loop across the lanes that
        // GCC vectorises (the taps' loop is unrolled after that).
        for (; ow0 + LANE_GROUP <= p.OW; ow0 += LANES) {
          UNROLL for (int t = 0; t < TAPS_T; ++t) {
            const device T* xt = xr + x_at[t] + ow0;
            UNROLL_INPUTS for (int j = 0; j < LANE_GROUP; ++j) {
              const float xv = float(xt[j]);
              acc[t][j] += float(yr0[ow0 + j]) * xv;
              acc[TAPS_T + t][j] += float(yr1[ow0 + j]) * xv;
            }
          }
        }
      }
      // A last, partial lane group, or strided rows.
      for (; ow0 < p.OW; ow0 += LANES) {
        const long valid = min(long(LANE_GROUP), p.OW - ow0);
        UNROLL for (int t = 0; t < TAPS_T; ++t) {
          for (long j = 0; j < valid; ++j) {
            const long ow = ow0 + j;
            const float xv = float(xr[x_at[t] + ow * sw]);
            acc[t][j] += float(yr0[ow * ys3]) * xv;
            acc[TAPS_T + t][j] += float(yr1[ow * ys3]) * xv;
          }
        }
      }
    }
    UNROLL for (int k = 0; k < TAPS_OC * TAPS_T; ++k)
      UNROLL for (int q = 0; q < LANE_GROUP / 4; ++q)
        sums[k][lg0 / 4 + q] = (acc[k][4 * q] + acc[k][4 * q + 1]) + (acc[k][4 * q + 2] + acc[k][4 * q + 3]);
  }

  // [chunk][Cy][cx_g][KH][KW], contiguous.
  device float* out = partial + ((long(gid.z) * p.Cy + g * p.cy_g + ocg0) * p.cx_g + ic) * taps + t0;
  UNROLL for (int k = 0; k < TAPS_OC * TAPS_T; ++k) {
    const int o = k / TAPS_T, t = k % TAPS_T;
    if (ocg0 + o < p.cy_g && t0 + t < taps)
      out[o * p.cx_g * taps + t] = (sums[k][0] + sums[k][1]) + (sums[k][2] + sums[k][3]);
  }
}

// conv2d_sum_chunks: dW[cy, cx, kh, kw] = the sum over chunks of conv2d_tiled_bwd_w's
// workspace, in dW's dtype and strides. Grid: x = KH * KW * cx_g, y = Cy.
template <typename T>
kernel void conv2d_sum_chunks(device T* dw [[buffer(0)]],
                              const device float* partial [[buffer(1)]],
                              constant Conv2dWeightGradParams& p [[buffer(2)]],
                              uint2 gid [[thread_position_in_grid]]) {
  const long taps = p.KH * p.KW;
  const long per_oc = p.cx_g * taps;
  if (long(gid.x) >= per_oc || long(gid.y) >= p.Cy) return;
  const long ic = gid.x / taps, tap = gid.x - (gid.x / taps) * taps;
  const long kh = tap / p.KW, kw = tap - (tap / p.KW) * p.KW;
  const long stride = p.Cy * per_oc;
  const device float* src = partial + long(gid.y) * per_oc + gid.x;
  float sum = 0.0f;
  for (long c = 0; c < p.chunks; ++c) sum += src[c * stride];
  dw[long(gid.y) * p.w_s[0] + ic * p.w_s[1] + kh * p.w_s[2] + kw * p.w_s[3]] = T(sum);
}

template [[host_name("conv2d_tiled_float")]] kernel decltype(conv2d_tiled<float>) conv2d_tiled<float>;
template [[host_name("conv2d_tiled_half")]] kernel decltype(conv2d_tiled<half>) conv2d_tiled<half>;
template [[host_name("conv2d_tiled_bfloat")]] kernel decltype(conv2d_tiled<bfloat>) conv2d_tiled<bfloat>;
template [[host_name("conv2d_tiled_bwd_w_float")]] kernel decltype(conv2d_tiled_bwd_w<float>) conv2d_tiled_bwd_w<float>;
template [[host_name("conv2d_tiled_bwd_w_half")]] kernel decltype(conv2d_tiled_bwd_w<half>) conv2d_tiled_bwd_w<half>;
template [[host_name("conv2d_tiled_bwd_w_bfloat")]] kernel decltype(conv2d_tiled_bwd_w<bfloat>) conv2d_tiled_bwd_w<bfloat>;
template [[host_name("conv2d_taps_bwd_w_float")]] kernel decltype(conv2d_taps_bwd_w<float>) conv2d_taps_bwd_w<float>;
template [[host_name("conv2d_taps_bwd_w_half")]] kernel decltype(conv2d_taps_bwd_w<half>) conv2d_taps_bwd_w<half>;
template [[host_name("conv2d_taps_bwd_w_bfloat")]] kernel decltype(conv2d_taps_bwd_w<bfloat>) conv2d_taps_bwd_w<bfloat>;
template [[host_name("conv2d_sum_chunks_float")]] kernel decltype(conv2d_sum_chunks<float>) conv2d_sum_chunks<float>;
template [[host_name("conv2d_sum_chunks_half")]] kernel decltype(conv2d_sum_chunks<half>) conv2d_sum_chunks<half>;
template [[host_name("conv2d_sum_chunks_bfloat")]] kernel decltype(conv2d_sum_chunks<bfloat>) conv2d_sum_chunks<bfloat>;
