// Matrix multiply: C = alpha * sum_b (A_b @ B_b) + beta * S, the one kernel behind mm,
// bmm, addmm, baddbmm, addbmm and addr (backend/ops/matmul.cpp), and the
// matrix-vector kernel behind mv, addmv, dot and vdot (and mm's products with one
// row or one column).
//
// matmul_gemm_<T>: every operand is read in place through (row, column, batch) strides,
// as BLAS does with its transpose flags and leading dimensions: a transposed operand
// is just a column-major one, a broadcast bias has stride 0. Per threadgroup a BM x BN
// block of C; per K step, BM x BK of A and BK x BN of B are staged into threadgroup
// memory as float (half and bfloat convert once here, so products accumulate in
// float32, as CPU's do), then each SIMD group multiplies its share with
// simdgroup_multiply_accumulate over 8x8 fragments held in registers across the whole
// K loop (summed in chunks of K, see below). The epilogue stores the fragments to
// threadgroup memory (reused) and every thread writes its elements with alpha, beta and
// the bias, rounding once to T.
// Grid: x = column blocks, y = row blocks, z = batches (1 when the batches are summed
// into one C, addbmm: p.reduce_batches > 1).
//
// Block shapes per shape class (the host picks one by M and N, matmul.cpp; a product
// with few columns runs as its transpose, C^T = B^T A^T, which is only other strides):
//   matmul_gemm_<T>         64 x 64: square and large products
//   matmul_gemm_narrow_<T>  64 x 32: 17..32 columns (attention's P @ V, head width 32)
//   matmul_gemm_skinny_<T>  8 rows x 64 (simulator) / 128 (GPU): up to 16 rows (an RNN
//                           step's batch, a linear layer on a few tokens)
// so that a skinny product is not padded to 64 rows.
//
// matmul_gemv_<T>: y = alpha * A @ x + beta * s, one thread per row of A.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

// Mirrored by backend/ops/matmul_params.h.
struct MatmulParams {
  long M, N, K;
  long a_rs, a_cs, a_bs;  // strides of A (rows, columns, batches)
  long b_rs, b_cs, b_bs;
  long c_rs, c_cs, c_bs;
  long s_rs, s_cs, s_bs;  // the bias S (beta's operand), broadcast by stride 0
  long reduce_batches;    // > 1: sum this many batches of A @ B into one C (addbmm)
  long round_terms;       // round alpha * AB and beta * S to T before adding them (addr, as CPU)
  float alpha, beta;      // beta == 0: S is not read (a NaN in it does not propagate)
};

// Per target. Apple GPUs: K steps of 16, four SIMD groups per threadgroup, laid out
// over the block as MM_SG_ROWS(BM, BN) x MM_SG_COLS(BM, BN) (64 x 64: 2 x 2 groups of
// 32 x 32, 4 x 4 fragments each), with coalesced staging loads.
// The simulator: its lane 0 does the whole block alone (staging, the products as
// register-blocked loops, the stores; see below), so K steps of 64 (the 64 x 64 block's
// staged tiles then fill the 32 KB of threadgroup memory) and one thread per
// threadgroup: the host dispatches MM_THREADS threads per group by
// DeviceInfo::is_simulated (no [[max_total_threads_per_threadgroup]]: built-in kernels
// accept 256). With the 32 lanes of a whole SIMD group, starting and switching the 31
// idle lanes' fibers cost a third of a small block's time (bmm 64 x (128x64 @ 64x128)).
// The kernel stays correct for 32 threads: lane 0 does the work, the others only
// count the SIMD-group calls.
#if defined(METALSIM_VECTOR_BYTES)
#define MM_BK 64
#define MM_THREADS 1
#define MM_SG_ROWS(BM, BN) 1
#define MM_SG_COLS(BM, BN) 1
#define MM_SKINNY_BN 64
#else
#define MM_BK 16
#define MM_THREADS 128
#define MM_SG_ROWS(BM, BN) ((BM) >= 4 * (BN) ? 4 : (BN) >= 4 * (BM) ? 1 : 2)
#define MM_SG_COLS(BM, BN) (MM_THREADS / 32 / MM_SG_ROWS(BM, BN))
#define MM_SKINNY_BN 128
#endif
#define MM_CHUNK_K 256  // K summed per partial sum (a multiple of MM_BK)

// Copies rows x cols of a strided operand into a dense float tile (row stride `ld`),
// zero outside the matrix.
// Apple GPUs: consecutive threads take consecutive elements along whichever dimension
// is unit-stride in memory, so a SIMD group's loads coalesce for row- and column-major
// operands alike. The simulator: one thread (lane 0, the one that runs the SIMD group's
// products) stages the whole tile; its threads run one after another, so splitting
// the copy between them bought nothing but the barriers around it (each a round of
// fiber switches). Rows of a row-major operand are straight copies; a column-major
// operand (a linear layer's weight^T, attention's k^T) goes through 8x8 blocks
// transposed in vector registers.
#if defined(METALSIM_VECTOR_BYTES)
typedef float mm_v8 __attribute__((vector_size(32), aligned(4)));
typedef int mm_i8 __attribute__((vector_size(32)));

typedef float mm_v4 __attribute__((vector_size(16), aligned(4)));

// out[i][j] = in[j][i] for an 8x8 block, given as w[j] = (column j, rows 0-3; column
// j + 4, rows 0-3) for j < 4 and w[4 + j] = the same for rows 4-7 (column j of the tile
// is 8 rows, contiguous in the operand); out rows go to the tile `ld` apart. Laid out so,
// the two 4-row halves of a column are two 16-byte loads into the halves of a register
// (the loads do the transpose's lane-crossing step), and two in-lane shuffle steps
// (16 shuffles, not 24) finish it.
METAL_FUNC void transpose8(threadgroup float* out, int ld, const mm_v8 (&w)[8]) {
  const mm_i8 lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};
  const mm_i8 lo2 = {0, 1, 8, 9, 4, 5, 12, 13}, hi2 = {2, 3, 10, 11, 6, 7, 14, 15};
  for (int h = 0; h < 2; ++h) {  // rows 4h..4h+3 of the tile
    const mm_v8 s0 = __builtin_shuffle(w[4 * h], w[4 * h + 1], lo), s1 = __builtin_shuffle(w[4 * h], w[4 * h + 1], hi);
    const mm_v8 s2 = __builtin_shuffle(w[4 * h + 2], w[4 * h + 3], lo);
    const mm_v8 s3 = __builtin_shuffle(w[4 * h + 2], w[4 * h + 3], hi);
    const mm_v8 r0 = __builtin_shuffle(s0, s2, lo2), r1 = __builtin_shuffle(s0, s2, hi2);
    const mm_v8 r2 = __builtin_shuffle(s1, s3, lo2), r3 = __builtin_shuffle(s1, s3, hi2);
    __builtin_memcpy(out + (4 * h + 0) * ld, &r0, sizeof r0);
    __builtin_memcpy(out + (4 * h + 1) * ld, &r1, sizeof r1);
    __builtin_memcpy(out + (4 * h + 2) * ld, &r2, sizeof r2);
    __builtin_memcpy(out + (4 * h + 3) * ld, &r3, sizeof r3);
  }
}
#endif

template <typename T>
METAL_FUNC void stage_tile(threadgroup float* tile, int ld, const device T* src, long rs, long cs, long r0,
                           long c0, long R, long C, int rows, int cols, uint tid) {
#if defined(METALSIM_VECTOR_BYTES)
  const int nr = r0 < R ? int(min(long(rows), R - r0)) : 0;  // rows and columns inside the matrix
  const int nc = c0 < C ? int(min(long(cols), C - c0)) : 0;
  const device T* base = src + r0 * rs + c0 * cs;
  if (cs == 1 || rs != 1) {
    for (int r = 0; r < rows; ++r) {
      threadgroup float* out = tile + r * ld;
      const int n = r < nr ? nc : 0;
      const device T* in = base + r * rs;
      if (cs == 1) {
        for (int c = 0; c < n; ++c) out[c] = float(in[c]);
      } else {
        for (int c = 0; c < n; ++c) out[c] = float(in[c * cs]);
      }
      for (int c = n; c < cols; ++c) out[c] = 0.0f;
    }
  } else {
    // Column-major (rs == 1), 8 columns at a time (cols is a multiple of 8).
    for (int c8 = 0; c8 < cols; c8 += 8) {
      const int n = nc - c8 < 0 ? 0 : (nc - c8 < 8 ? nc - c8 : 8);
      const device T* in = base + c8 * cs;
      int r = 0;
      if (n == 8) {
        for (; r + 8 <= nr; r += 8) {
          mm_v8 w[8];  // transpose8's layout: halves of columns j and j + 4
          for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j) {
              mm_v4 x, y;
              if constexpr (sizeof(T) == sizeof(float)) {
                __builtin_memcpy(&x, static_cast<const device float*>(in + r + 4 * h + j * cs), sizeof x);
                __builtin_memcpy(&y, static_cast<const device float*>(in + r + 4 * h + (j + 4) * cs), sizeof y);
              } else {
                for (int i = 0; i < 4; ++i) x[i] = float(in[r + 4 * h + i + j * cs]);
                for (int i = 0; i < 4; ++i) y[i] = float(in[r + 4 * h + i + (j + 4) * cs]);
              }
              w[4 * h + j] = __builtin_shufflevector(x, y, 0, 1, 2, 3, 4, 5, 6, 7);
            }
          transpose8(tile + r * ld + c8, ld, w);
        }
      }
      for (; r < rows; ++r) {
        threadgroup float* out = tile + r * ld + c8;
        for (int j = 0; j < 8; ++j) out[j] = (r < nr && j < n) ? float(in[r + j * cs]) : 0.0f;
      }
    }
  }
#else
  const bool along_rows = cs == 1 || rs != 1;  // memory runs along a row of the tile
  const int count = rows * cols;
  for (int i = int(tid); i < count; i += MM_THREADS) {
    const int r = along_rows ? i / cols : i % rows, c = along_rows ? i % cols : i / rows;
    const long gr = r0 + r, gc = c0 + c;
    tile[r * ld + c] = (gr < R && gc < C) ? float(src[gr * rs + gc * cs]) : 0.0f;
  }
#endif
}

#if defined(METALSIM_VECTOR_BYTES)
// The simulator reads a float operand in place when a K step's tile lies inside it with
// unit column stride (the panel takes rows of any stride): no staging copy. Other
// dtypes convert through staging.
METAL_FUNC const device float* float_operand(const device float* p) { return p; }
template <typename T>
METAL_FUNC const device float* float_operand(const device T*) { return nullptr; }
METAL_FUNC device float* float_result(device float* p) { return p; }
template <typename T>
METAL_FUNC device float* float_result(device T*) { return nullptr; }

// Zero matrices are loaded from zeros (one SIMD-group matrix call on every lane, lane 0
// copies 256 bytes), rather than assigned fresh (a 260-byte matrix object copied on each
// of the 32 lanes) or multiplied from zeros (on lane 0 as many multiply-adds as a
// K = 8 product), which this kernel did before.
constant float mm_zeros[64] = {};
#define MM_ZERO(m) simdgroup_load(m, mm_zeros, 8)

// Lane 0's register-blocked product of a K step, d[i][j] += A[8i.., :k] B[:k, 8j..]:
// per element the products are added in the order of k, one multiply-add each, as
// simdgroup_multiply_accumulate over 8x8 fragments adds them (bit for bit the #else
// branch's loop). Blocks of MM_R rows x MM_V vectors of MM_W floats stay in vector
// registers over the whole K step; each vector is loaded from and stored to the
// fragments' rows once per block, assembled by value (a vector written piecewise
// through memory, as the prelude's panel does, is kept on the stack by GCC: a load and
// a store of every accumulator per k, which halved the speed).
#if METALSIM_VECTOR_BYTES >= 64
#define MM_W 16
#define MM_R 4
#define MM_V 4
#elif METALSIM_VECTOR_BYTES >= 32
#define MM_W 8
#define MM_R 4
#define MM_V 2
#else
#define MM_W 4
#define MM_R 2
#define MM_V 4
#endif
typedef float mm_vec __attribute__((vector_size(4 * MM_W), aligned(4)));

template <int TM, int TN>
METAL_FUNC mm_vec mm_get(thread simdgroup_float8x8 (&d)[TM][TN], int row, int col) {
#if MM_W == 16
  mm_v8 lo, hi;
  __builtin_memcpy(&lo, &d[row / 8][col / 8].e[row % 8][0], sizeof lo);
  __builtin_memcpy(&hi, &d[row / 8][col / 8 + 1].e[row % 8][0], sizeof hi);
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
  mm_vec v;
  __builtin_memcpy(&v, &d[row / 8][col / 8].e[row % 8][col % 8], sizeof v);
  return v;
#endif
}
template <int TM, int TN>
METAL_FUNC void mm_put(thread simdgroup_float8x8 (&d)[TM][TN], int row, int col, mm_vec v) {
#if MM_W == 16
  const mm_v8 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  const mm_v8 hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  __builtin_memcpy(&d[row / 8][col / 8].e[row % 8][0], &lo, sizeof lo);
  __builtin_memcpy(&d[row / 8][col / 8 + 1].e[row % 8][0], &hi, sizeof hi);
#else
  __builtin_memcpy(&d[row / 8][col / 8].e[row % 8][col % 8], &v, sizeof v);
#endif
}

// Where a K step's sums start and end: `fresh`, from zero (the first step of a sum:
// the accumulators start as zero registers, the same values as zeroed fragments, and
// the fragments need no zeroing pass); `out`, when not null, is a dense block of rows
// `ldo` apart that takes the finished sums straight from the registers (the last step
// of a plain product), instead of the fragments and a copying pass after.
struct MmEnds {
  bool fresh;
  float* out;
  long ldo;
};

template <int R, int V, int TM, int TN>
METAL_FUNC void mm_block(thread simdgroup_float8x8 (&d)[TM][TN], const float* a, ulong lda, const float* b,
                         ulong ldb, int k, int r0, int c0, MmEnds ends) {
  mm_vec x[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) x[r][v] = ends.fresh ? mm_vec{} : mm_get(d, r0 + r, c0 + v * MM_W);
  const float* ar = a + r0 * lda;
  const float* br = b + c0;
  for (int kk = 0; kk < k; ++kk, br += ldb, ++ar) {
    mm_vec bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) __builtin_memcpy(&bv[v], br + v * MM_W, sizeof bv[v]);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float s = ar[r * lda];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) x[r][v] += s * bv[v];
    }
  }
  if (ends.out != nullptr) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) __builtin_memcpy(ends.out + (r0 + r) * ends.ldo + c0 + v * MM_W, &x[r][v], sizeof x[r][v]);
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) mm_put(d, r0 + r, c0 + v * MM_W, x[r][v]);
}

// The cache lines of the tiles the next K step will stage or read (rows x cols at (r0,
// c0) of an operand): `lines` runs of `run` bytes, `step` bytes apart (its rows when
// they are contiguous, else its columns). mm_panel prefetches them a share at a time
// between its row blocks: issued all at once, a K step's 512 prefetches filled the
// core's line-fill buffers and the loop stalled on them (a fifth of the kernel's time).
struct MmPrefetch {
  const char* base;
  long step;
  int lines, run;
};
template <typename T>
METAL_FUNC MmPrefetch mm_prefetch_plan(const device T* src, long rs, long cs, long r0, long c0, long R, long C,
                                       int rows, int cols) {
  const bool along_rows = cs == 1;
  // Outside the matrix, or neither dimension contiguous: nothing to gain.
  if (r0 >= R || c0 >= C || (!along_rows && rs != 1)) return MmPrefetch{nullptr, 0, 0, 0};
  const int nr = int(min(long(rows), R - r0)), nc = int(min(long(cols), C - c0));
  const char* base = (const char*)(&src[0]) + (r0 * rs + c0 * cs) * long(sizeof(T));
  return MmPrefetch{base, long(sizeof(T)) * (along_rows ? rs : cs), along_rows ? nr : nc,
                    int(sizeof(T)) * (along_rows ? nc : nr)};
}
// Share `part` of `parts` of a plan's lines.
METAL_FUNC void mm_prefetch_share(const MmPrefetch& f, int part, int parts) {
  for (int l = f.lines * part / parts; l < f.lines * (part + 1) / parts; ++l)
    for (int o = 0; o < f.run; o += 64) __builtin_prefetch(f.base + l * f.step + o);
}

// d (TM x TN fragments) += a (8 TM rows, row stride lda) @ b (k rows, row stride ldb),
// k a multiple of 8; on lane 0 only (the caller's tid == 0: one SIMD group per block).
// Between row blocks it prefetches the next K step's tiles (pa, pb).
template <int TM, int TN>
METAL_FUNC void mm_panel(thread simdgroup_float8x8 (&d)[TM][TN], const float* a, ulong lda, const float* b,
                         ulong ldb, int k, const thread MmPrefetch& pa, const thread MmPrefetch& pb, MmEnds ends) {
  static_assert((8 * TN) % MM_W == 0, "fragment columns must fill whole vectors");
  // A block row narrower than MM_V vectors (64 x 32 on AVX-512: two) takes twice the
  // rows per register block instead, so that as many accumulators are in flight.
  constexpr bool tall = 8 * TN == 2 * MM_W && MM_V == 4 && (8 * TM) % (2 * MM_R) == 0;
  constexpr int R = tall ? 2 * MM_R : MM_R;
  constexpr int blocks = 8 * TM / R;
  for (int r0 = 0; r0 < 8 * TM; r0 += R) {
    mm_prefetch_share(pa, r0 / R, blocks);
    mm_prefetch_share(pb, r0 / R, blocks);
    if constexpr (tall) {
      mm_block<R, 2>(d, a, lda, b, ldb, k, r0, 0, ends);
    } else {
      int c0 = 0;
      for (; c0 + MM_V * MM_W <= 8 * TN; c0 += MM_V * MM_W) mm_block<R, MM_V>(d, a, lda, b, ldb, k, r0, c0, ends);
#if MM_V >= 4
      if (c0 + 2 * MM_W <= 8 * TN) mm_block<R, 2>(d, a, lda, b, ldb, k, r0, c0, ends), c0 += 2 * MM_W;
#endif
      if (c0 + MM_W <= 8 * TN) mm_block<R, 1>(d, a, lda, b, ldb, k, r0, c0, ends);
    }
  }
}

// Lane 0's whole-block fragment work, one loop instead of a SIMD-group call per
// fragment on each of the 32 lanes (whose per-call counting and flag updates cost
// more than a short K step's products): zeroing, and storing the fragments as a
// dense block (row stride ld). Every lane counts one call for each (the caller's
// MM_ZERO(marker)).
template <int TM, int TN>
METAL_FUNC void mm_zero_all(thread simdgroup_float8x8 (&d)[TM][TN]) {
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) __builtin_memset((void*)&d[i][j], 0, sizeof d[i][j]);  // spread = false too
}
// acc = I * part + acc per fragment, the arithmetic of simdgroup_multiply_accumulate
// with the identity (the prelude's mma8_f32: rows as vectors, products in the order of
// k), so the chunked sums round as the #else branch's do (I * inf is NaN there too).
// A fragment whose elements are all finite adds as acc + part per element, one rounding
// (the identity's zero terms add exact zeros, and acc, starting from +0, is never -0, so
// they change nothing): a plain vector add. Otherwise (inf or NaN, which the zero terms
// turn into NaN in other rows) the identity product itself.
template <int TM, int TN>
METAL_FUNC void mm_add_all(thread simdgroup_float8x8 (&acc)[TM][TN], thread simdgroup_float8x8 (&part)[TM][TN]) {
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) {
      mm_v8 brow[8], nonfinite = {};
      for (int k = 0; k < 8; ++k) {
        __builtin_memcpy(&brow[k], &part[i][j].e[k][0], 32);
        nonfinite += brow[k] - brow[k];  // 0 where finite, NaN from inf or NaN
      }
      bool finite = true;
      for (int c = 0; c < 8; ++c) finite = finite && nonfinite[c] == 0.0f;
      if (finite) {
        for (int r = 0; r < 8; ++r) {
          mm_v8 row;
          __builtin_memcpy(&row, &acc[i][j].e[r][0], 32);
          row += brow[r];
          __builtin_memcpy(&acc[i][j].e[r][0], &row, 32);
        }
        continue;
      }
      for (int r = 0; r < 8; ++r) {
        mm_v8 row;
        __builtin_memcpy(&row, &acc[i][j].e[r][0], 32);
        for (int k = 0; k < 8; ++k) row += (r == k ? 1.0f : 0.0f) * brow[k];
        __builtin_memcpy(&acc[i][j].e[r][0], &row, 32);
      }
    }
}
template <int TM, int TN>
METAL_FUNC void mm_store_all(thread simdgroup_float8x8 (&d)[TM][TN], float* out, long ld) {
  for (int i = 0; i < TM; ++i)
    for (int r = 0; r < 8; ++r)
      for (int j = 0; j < TN; ++j) __builtin_memcpy(out + (i * 8 + r) * ld + j * 8, &d[i][j].e[r][0], 32);
}

#endif

template <typename T, int BM, int BN>
kernel void matmul_gemm(const device T* A [[buffer(0)]], const device T* B [[buffer(1)]],
                        device T* C [[buffer(2)]], const device T* S [[buffer(3)]],
                        constant MatmulParams& p [[buffer(4)]], uint3 group [[threadgroup_position_in_grid]],
                        uint tid [[thread_index_in_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]]) {
  constexpr int SGN = MM_SG_COLS(BM, BN);
  constexpr int TM = BM / MM_SG_ROWS(BM, BN) / 8, TN = BN / SGN / 8;  // fragments per SIMD group
  constexpr int STAGE = BM * MM_BK + MM_BK * BN, SMEM = STAGE > BM * BN ? STAGE : BM * BN;
  threadgroup float smem[SMEM];
  threadgroup float* As = smem;               // [BM][BK]
  threadgroup float* Bs = smem + BM * MM_BK;  // [BK][BN]
  const long m0 = long(group.y) * BM, n0 = long(group.x) * BN;
  const int sm = int(sg) / SGN * (TM * 8), sn = int(sg) % SGN * (TN * 8);

  // Products are summed into `part` over MM_CHUNK_K of K, then `part` into `acc`: a
  // two-level sum, whose rounding error grows like sqrt(chunk) + sqrt(K / chunk) instead
  // of sqrt(K) for one running sum, so that long K stays as close to the exact result as
  // CPU BLAS's blocked sums are. Matrices add through a multiply by the identity (MSL has
  // no matrix add); one per chunk costs 8 / MM_CHUNK_K of the multiplies.
#if defined(METALSIM_VECTOR_BYTES)
  // Only lane 0 uses the accumulators (it does every fragment operation below; other
  // lanes, when a group has them, count one call per pass on `marker`): left
  // unconstructed, they cost other lanes no writes of their fiber stacks.
  union Frags {
    simdgroup_float8x8 m[TM][TN];
    Frags() {}
  } acc_storage, part_storage;
  auto& acc = acc_storage.m;
  auto& part = part_storage.m;
  simdgroup_float8x8 marker;
#else
  simdgroup_float8x8 acc[TM][TN], part[TM][TN];
  simdgroup_float8x8 identity(1.0f);
#define MM_ZERO(m) m = make_filled_simdgroup_matrix<float, 8, 8>(0.0f)
#endif
  // One chunk in all: `part` is the whole sum, the chunk add is skipped (for short K it
  // would cost a sixth of the multiplies, and I * part turns an inf in part into NaN),
  // and `acc` is never used.
  const bool single_chunk = p.reduce_batches == 1 && p.K <= MM_CHUNK_K;
#if defined(METALSIM_VECTOR_BYTES)
  // `part` starts each sum from zero registers (MmEnds::fresh); it is zeroed only when
  // no product runs (alpha == 0), as the epilogue then reads it.
  bool part_fresh = true;
  // A plain product (alpha 1, no bias, a whole block of a float C with unit column
  // stride): the sums go straight to C (as simdgroup_store to device memory, which Metal
  // allows), without the barrier and the second pass of the epilogue below; for a
  // single chunk from the registers of the last K step.
  device float* fc = float_result(C);
  const bool plain_store = fc != nullptr && p.alpha == 1.0f && p.beta == 0.0f && p.round_terms == 0 &&
                           p.c_cs == 1 && m0 + BM <= p.M && n0 + BN <= p.N;
  device float* cb =
      plain_store ? &fc[(p.reduce_batches > 1 ? 0 : long(group.z)) * p.c_bs + (m0 + sm) * p.c_rs + n0 + sn] : nullptr;
  // Otherwise a single chunk's last K step puts its sums into the epilogue's block of
  // threadgroup memory when A is read in place (the step then reads only the staged B,
  // which lies beyond that block: MM_BK >= BN), rather than into the fragments and a
  // copying pass after.
  bool part_in_smem = false;
  MM_ZERO(marker);
  if (tid == 0) {
    if (!single_chunk) mm_zero_all(acc);
    if (p.alpha == 0.0f) mm_zero_all(part);
  }
#else
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) {
      if (!single_chunk) MM_ZERO(acc[i][j]);
      MM_ZERO(part[i][j]);
    }
#endif

  if (p.alpha != 0.0f) {
    for (long b = 0; b < p.reduce_batches; ++b) {
      const long batch = p.reduce_batches > 1 ? b : long(group.z);
      const device T* a = A + batch * p.a_bs;
      const device T* bm = B + batch * p.b_bs;
      for (long k0 = 0; k0 < p.K; k0 += MM_BK) {
        // The K step's length rounded up to whole fragments (the staged tiles are zero
        // beyond K): a short K is not multiplied as a whole MM_BK.
        const int kl = p.K - k0 < MM_BK ? int((p.K - k0 + 7) / 8 * 8) : MM_BK;
#if defined(METALSIM_VECTOR_BYTES)
        // Lane 0 stages what is not read in place and runs the whole K step: no other
        // thread touches the tiles, so no barriers.
        // B is read in place only by blocks of few rows: a 64-row block reads each row of
        // a K step 16 times, faster from a packed tile that stays in L1 (rows of a B with
        // a power-of-two row stride, 1024 or 2048 floats, all map to the same L1 sets).
        const device float* fa = float_operand(a);
        const device float* fb = float_operand(bm);
        const bool a_in_place = fa != nullptr && p.a_cs == 1 && m0 + BM <= p.M && k0 + kl <= p.K;
        const bool b_in_place =
            BM <= 16 && fb != nullptr && p.b_cs == 1 && n0 + BN <= p.N && k0 + kl <= p.K;
        if (tid == 0) {
          if (!a_in_place) stage_tile(As, MM_BK, a, p.a_rs, p.a_cs, m0, k0, p.M, p.K, BM, kl, tid);
          if (!b_in_place) stage_tile(Bs, BN, bm, p.b_rs, p.b_cs, k0, n0, p.K, p.N, kl, BN, tid);
        }
        // Every lane counts one SIMD-group matrix call per K step (the simulator compares
        // the lanes' counts: a lane skipping the step is caught as divergent); lane 0 runs
        // the step's products (mm_panel), the same sums as the #else branch's loop.
        MM_ZERO(marker);
        if (tid == 0) {
          // The next K step's tiles, fetched while this one multiplies.
          MmPrefetch next_a{nullptr, 0, 0, 0}, next_b{nullptr, 0, 0, 0};
          if (k0 + MM_BK < p.K) {
            const long kn = k0 + MM_BK;
            // A read in place streams along its rows, which the hardware prefetches
            // (prefetching it too measured 20% slower for attention's P @ V).
            if (fa == nullptr || p.a_cs != 1) next_a = mm_prefetch_plan(a, p.a_rs, p.a_cs, m0, kn, p.M, p.K, BM, MM_BK);
            next_b = mm_prefetch_plan(bm, p.b_rs, p.b_cs, kn, n0, p.K, p.N, MM_BK, BN);
          }
          const float* pa = a_in_place ? &fa[(m0 + sm) * p.a_rs + k0] : &As[sm * MM_BK];
          const float* pb = b_in_place ? &fb[k0 * p.b_rs + n0 + sn] : &Bs[sn];
          const bool last = single_chunk && k0 + MM_BK >= p.K;
          static_assert(MM_BK >= BN, "the staged B must lie beyond the epilogue's block");
          part_in_smem = last && !plain_store && a_in_place;
          float* out = nullptr;
          if (last && plain_store) out = cb;
          else if (part_in_smem) out = &smem[sm * BN + sn];
          mm_panel(part, pa, ulong(a_in_place ? p.a_rs : MM_BK), pb, ulong(b_in_place ? p.b_rs : BN), kl, next_a,
                   next_b, MmEnds{part_fresh, out, plain_store ? p.c_rs : BN});
        }
        part_fresh = false;
#else
        stage_tile(As, MM_BK, a, p.a_rs, p.a_cs, m0, k0, p.M, p.K, BM, MM_BK, tid);
        stage_tile(Bs, BN, bm, p.b_rs, p.b_cs, k0, n0, p.K, p.N, MM_BK, BN, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int kk = 0; kk < kl; kk += 8) {
          simdgroup_float8x8 fa[TM], fb[TN];
          for (int i = 0; i < TM; ++i) simdgroup_load(fa[i], As + (sm + i * 8) * MM_BK + kk, MM_BK);
          for (int j = 0; j < TN; ++j) simdgroup_load(fb[j], Bs + kk * BN + sn + j * 8, BN);
          for (int i = 0; i < TM; ++i)
            for (int j = 0; j < TN; ++j) simdgroup_multiply_accumulate(part[i][j], fa[i], fb[j], part[i][j]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
#endif
        if (!single_chunk && ((k0 + MM_BK) % MM_CHUNK_K == 0 || k0 + MM_BK >= p.K)) {
#if defined(METALSIM_VECTOR_BYTES)
          MM_ZERO(marker);
          if (tid == 0) {
            mm_add_all(acc, part);
          }
          part_fresh = true;
#else
          for (int i = 0; i < TM; ++i)
            for (int j = 0; j < TN; ++j) {
              simdgroup_multiply_accumulate(acc[i][j], identity, part[i][j], acc[i][j]);
              MM_ZERO(part[i][j]);
            }
#endif
        }
      }
    }
  }

#if defined(METALSIM_VECTOR_BYTES)
  if (plain_store) {  // a single chunk's sums are in C already (the last K step)
    MM_ZERO(marker);
    if (tid == 0 && !single_chunk) mm_store_all(acc, cb, p.c_rs);
    return;
  }
#endif
  // Epilogue through threadgroup memory (the staging tiles are free now).
#if defined(METALSIM_VECTOR_BYTES)
  MM_ZERO(marker);
  if (tid == 0) {
    if (!single_chunk) mm_store_all(acc, &smem[sm * BN + sn], BN);
    else if (!part_in_smem) mm_store_all(part, &smem[sm * BN + sn], BN);
  }
#else
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) {
      if (single_chunk) simdgroup_store(part[i][j], smem + (sm + i * 8) * BN + sn + j * 8, BN);
      else simdgroup_store(acc[i][j], smem + (sm + i * 8) * BN + sn + j * 8, BN);
    }
#endif
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const long batch = p.reduce_batches > 1 ? 0 : long(group.z);
  device T* c = C + batch * p.c_bs;
  const device T* s = S + batch * p.s_bs;
  const int rows = int(min(long(BM), p.M - m0)), cols = int(min(long(BN), p.N - n0));
#if defined(METALSIM_VECTOR_BYTES)
  // The simulator: lane 0 writes whole rows, so that the common cases (C with unit column
  // stride, no bias or a bias with unit column stride) are loops that vectorise.
  for (int r = 0; tid == 0 && r < rows; ++r) {
    const threadgroup float* sr = smem + r * BN;
    device T* cr = c + (m0 + r) * p.c_rs + n0 * p.c_cs;
    const device T* br = s + (m0 + r) * p.s_rs + n0 * p.s_cs;
    const float alpha = p.alpha, beta = p.beta;
    if (p.c_cs == 1 && p.round_terms == 0 && beta == 0.0f) {
      for (int col = 0; col < cols; ++col) cr[col] = T(alpha * sr[col]);
    } else if (p.c_cs == 1 && p.round_terms == 0 && p.s_cs == 1) {
      for (int col = 0; col < cols; ++col) cr[col] = T(alpha * sr[col] + beta * float(br[col]));
    } else {
      for (int col = 0; col < cols; ++col) {
        float v = alpha * sr[col];
        if (p.round_terms != 0) v = float(T(v));
        if (beta != 0.0f) {
          const float bias = beta * float(br[col * p.s_cs]);
          v += p.round_terms != 0 ? float(T(bias)) : bias;
        }
        cr[col * p.c_cs] = T(v);
      }
    }
  }
#else
  for (int i = int(tid); i < BM * BN; i += MM_THREADS) {
    const int r = i / BN, col = i % BN;
    if (r >= rows || col >= cols) continue;
    const long gr = m0 + r, gc = n0 + col;
    float v = p.alpha != 0.0f ? p.alpha * smem[i] : 0.0f;
    if (p.round_terms != 0) v = float(T(v));
    if (p.beta != 0.0f) {
      const float bias = p.beta * float(s[gr * p.s_rs + gc * p.s_cs]);
      v += p.round_terms != 0 ? float(T(bias)) : bias;
    }
    c[gr * p.c_rs + gc * p.c_cs] = T(v);
  }
#endif
}

// Matrix-vector: y[m] = alpha * sum_k A[m, k] x[k] + beta * s[m]. One thread per row,
// four partial sums (independent chains; the simulator vectorises them), summed per
// chunk of MM_CHUNK_K into a running total, as the GEMM sums its chunks, so that long
// K stays within CPU's tolerance.
struct GemvParams {
  long M, K;
  long a_rs, a_cs;
  long x_s, y_s, s_s;
  float alpha, beta;
};

template <typename T>
kernel void matmul_gemv(const device T* A [[buffer(0)]], const device T* x [[buffer(1)]], device T* y [[buffer(2)]],
                        const device T* s [[buffer(3)]], constant GemvParams& p [[buffer(4)]],
                        uint row [[thread_position_in_grid]]) {
  if (long(row) >= p.M) return;
  const device T* a = A + long(row) * p.a_rs;
  float total = 0.0f;
  if (p.alpha != 0.0f) {
    const bool dense = p.a_cs == 1 && p.x_s == 1;
    for (long k0 = 0; k0 < p.K; k0 += MM_CHUNK_K) {
      const long end = min(p.K, k0 + MM_CHUNK_K);
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      long k = k0;
      if (dense) {
        for (; k + 4 <= end; k += 4)
          for (int j = 0; j < 4; ++j) part[j] += float(a[k + j]) * float(x[k + j]);
      }
      for (; k < end; ++k) part[0] += float(a[k * p.a_cs]) * float(x[k * p.x_s]);
      total += (part[0] + part[1]) + (part[2] + part[3]);
    }
  }
  float v = p.alpha != 0.0f ? p.alpha * total : 0.0f;
  if (p.beta != 0.0f) v += p.beta * float(s[long(row) * p.s_s]);
  y[long(row) * p.y_s] = T(v);
}

#define MATMUL_GEMM(name, T, BM, BN)                                                                       \
  template [[host_name(name #T)]] kernel void matmul_gemm<T, BM, BN>(                                      \
      const device T*, const device T*, device T*, const device T*, constant MatmulParams&, uint3, uint, uint);
#define MATMUL_KERNELS(T)                                                      \
  MATMUL_GEMM("matmul_gemm_", T, 64, 64)                                       \
  MATMUL_GEMM("matmul_gemm_narrow_", T, 64, 32)                                \
  MATMUL_GEMM("matmul_gemm_skinny_", T, 8, MM_SKINNY_BN)                       \
  template [[host_name("matmul_gemv_" #T)]] kernel void matmul_gemv<T>(        \
      const device T*, const device T*, device T*, const device T*, constant GemvParams&, uint);
MATMUL_KERNELS(float)
MATMUL_KERNELS(half)
MATMUL_KERNELS(bfloat)
