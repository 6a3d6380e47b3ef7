// Matrix multiply: C = alpha * sum_b (A_b @ B_b) + beta * S, the one kernel behind mm,
// bmm, addmm, baddbmm, addbmm and addr (backend/ops/matmul.cpp), and the
// matrix-vector kernel behind mv, addmv, dot and vdot.
//
// matmul_gemm_<T>: every operand is read in place through (row, column, batch) strides,
// as BLAS does with its transpose flags and leading dimensions: a transposed operand
// is just a column-major one, a broadcast bias has stride 0. Per threadgroup a BM x BN
// block of C; per K step, BM x BK of A and BK x BN of B are staged into threadgroup
// memory as float (half and bfloat convert once here, so products accumulate in
// float32, as CPU's do), then each SIMD group multiplies its share with
// simdgroup_multiply_accumulate over 8x8 fragments held in registers across the whole
// K loop (summed in chunks of K, see below). The epilogue stores the fragments to threadgroup memory (reused) and every
// thread writes its elements with alpha, beta and the bias, rounding once to T.
// Grid: x = column blocks, y = row blocks, z = batches (1 when the batches are summed
// into one C, addbmm: p.reduce_batches > 1).
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

// Block shape per target. Apple GPUs: 64 x 64 blocks, K steps of 16, 2 x 2 SIMD groups
// of 32 x 32 (4 x 4 fragments each: 16 accumulators per thread's share). The simulator
// runs each SIMD-group matrix call once for the whole group (its lane 0), and a K step's
// calls as one blocked loop (simdgroup_multiply_accumulate_panel), so one large
// SIMD-group tile and long K steps pay off there: one SIMD group per 64 x 64 block
// (8 x 8 fragments), K steps of 64 (the staged tiles then fill the 32 KB of threadgroup
// memory; fewer steps, fewer barriers, each a round of fiber switches). The host
// dispatches MM_THREADS threads per group by
// DeviceInfo::is_simulated (no [[max_total_threads_per_threadgroup]]: built-in kernels
// accept 256).
#if defined(METALSIM_VECTOR_BYTES)
#define MM_BM 64
#define MM_BN 64
#define MM_BK 64
#define MM_SGM 1
#define MM_SGN 1
#define MM_THREADS 32  // MM_SGM * MM_SGN SIMD groups; the host dispatches this many (matmul.cpp)
#else
#define MM_BM 64
#define MM_BN 64
#define MM_BK 16
#define MM_SGM 2
#define MM_SGN 2
#define MM_THREADS 128
#endif
#define MM_CHUNK_K 256  // K summed per partial sum (a multiple of MM_BK)
#define MM_TM (MM_BM / MM_SGM / 8)  // fragments per SIMD group, down
#define MM_TN (MM_BN / MM_SGN / 8)  // and across
#define MM_STAGE (MM_BM * MM_BK + MM_BK * MM_BN)
#define MM_SMEM (MM_STAGE > MM_BM * MM_BN ? MM_STAGE : MM_BM * MM_BN)

// Copies rows x cols of a strided operand into a dense float tile (row stride `ld`),
// zero outside the matrix.
// Apple GPUs: consecutive threads take consecutive elements along whichever dimension
// is unit-stride in memory, so a SIMD group's loads coalesce for row- and column-major
// operands alike. The simulator: each thread copies whole lines of the tile along that
// dimension (its threads run one after another, and a line is a loop the compiler
// vectorises).
template <typename T>
METAL_FUNC void stage_tile(threadgroup float* tile, int ld, const device T* src, long rs, long cs, long r0,
                           long c0, long R, long C, int rows, int cols, uint tid) {
  const bool along_rows = cs == 1 || rs != 1;  // memory runs along a row of the tile
#if defined(METALSIM_VECTOR_BYTES)
  const int lines = along_rows ? rows : cols, length = along_rows ? cols : rows;
  const long line0 = along_rows ? r0 : c0, pos0 = along_rows ? c0 : r0;
  const long line_count = along_rows ? R : C, pos_count = along_rows ? C : R;
  const long line_stride = along_rows ? rs : cs, pos_stride = along_rows ? cs : rs;
  const int tile_line = along_rows ? ld : 1, tile_pos = along_rows ? 1 : ld;
  for (int l = int(tid); l < lines; l += MM_THREADS) {
    threadgroup float* out = tile + l * tile_line;
    const long gl = line0 + l;
    const long avail = gl < line_count ? pos_count - pos0 : 0;
    const int n = avail <= 0 ? 0 : (avail < length ? int(avail) : length);
    const device T* in = src + gl * line_stride + pos0 * pos_stride;
    if (pos_stride == 1) {
      for (int i = 0; i < n; ++i) out[i * tile_pos] = float(in[i]);
    } else {
      for (int i = 0; i < n; ++i) out[i * tile_pos] = float(in[i * pos_stride]);
    }
    for (int i = n; i < length; ++i) out[i * tile_pos] = 0.0f;
  }
#else
  const int count = rows * cols;
  for (int i = int(tid); i < count; i += MM_THREADS) {
    const int r = along_rows ? i / cols : i % rows, c = along_rows ? i % cols : i / rows;
    const long gr = r0 + r, gc = c0 + c;
    tile[r * ld + c] = (gr < R && gc < C) ? float(src[gr * rs + gc * cs]) : 0.0f;
  }
#endif
}

template <typename T>
kernel void matmul_gemm(const device T* A [[buffer(0)]], const device T* B [[buffer(1)]],
                        device T* C [[buffer(2)]], const device T* S [[buffer(3)]],
                        constant MatmulParams& p [[buffer(4)]], uint3 group [[threadgroup_position_in_grid]],
                        uint tid [[thread_index_in_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float smem[MM_SMEM];
  threadgroup float* As = smem;                  // [BM][BK]
  threadgroup float* Bs = smem + MM_BM * MM_BK;  // [BK][BN]
  const long m0 = long(group.y) * MM_BM, n0 = long(group.x) * MM_BN;
  const int sm = int(sg) / MM_SGN * (MM_TM * 8), sn = int(sg) % MM_SGN * (MM_TN * 8);

  // Products are summed into `part` over MM_CHUNK_K of K, then `part` into `acc`: a
  // two-level sum, whose rounding error grows like sqrt(chunk) + sqrt(K / chunk) instead
  // of sqrt(K) for one running sum, so that long K stays as close to the exact result as
  // CPU BLAS's blocked sums are. Matrices add through a multiply by the identity (MSL has
  // no matrix add); one per chunk costs 8 / MM_CHUNK_K of the multiplies.
  simdgroup_float8x8 acc[MM_TM][MM_TN], part[MM_TM][MM_TN];
  simdgroup_float8x8 identity(1.0f);
#if defined(METALSIM_VECTOR_BYTES)
  // The simulator zeroes through a multiply (lane 0 writes, the other lanes count)
  // rather than assigning a fresh matrix, which copies the whole matrix object on
  // each of the 32 lanes: for short K that copying took longer than the products.
  simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
#define MM_ZERO(m) simdgroup_multiply(m, zero, zero)
#else
#define MM_ZERO(m) m = make_filled_simdgroup_matrix<float, 8, 8>(0.0f)
#endif
  for (int i = 0; i < MM_TM; ++i)
    for (int j = 0; j < MM_TN; ++j) {
      MM_ZERO(acc[i][j]);
      MM_ZERO(part[i][j]);
    }

  // One chunk in all: `part` is the whole sum, the chunk add is skipped (for short K it
  // would cost a sixth of the multiplies, and I * part turns an inf in part into NaN).
  const bool single_chunk = p.reduce_batches == 1 && p.K <= MM_CHUNK_K;
  if (p.alpha != 0.0f) {
    for (long b = 0; b < p.reduce_batches; ++b) {
      const long batch = p.reduce_batches > 1 ? b : long(group.z);
      const device T* a = A + batch * p.a_bs;
      const device T* bm = B + batch * p.b_bs;
      for (long k0 = 0; k0 < p.K; k0 += MM_BK) {
        stage_tile(As, MM_BK, a, p.a_rs, p.a_cs, m0, k0, p.M, p.K, MM_BM, MM_BK, tid);
        stage_tile(Bs, MM_BN, bm, p.b_rs, p.b_cs, k0, n0, p.K, p.N, MM_BK, MM_BN, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
#if defined(METALSIM_VECTOR_BYTES)
        // The simulator: exactly the loop below (the same calls, counted on every lane, the
        // same sums), with lane 0 running the whole K step as one register-blocked loop
        // (metalsim_prelude/simdgroup_matrix.h).
        metalsim::simdgroup_multiply_accumulate_panel(part, As + sm * MM_BK, MM_BK, Bs + sn, MM_BN, MM_BK);
#else
        for (int kk = 0; kk < MM_BK; kk += 8) {
          simdgroup_float8x8 fa[MM_TM], fb[MM_TN];
          for (int i = 0; i < MM_TM; ++i) simdgroup_load(fa[i], As + (sm + i * 8) * MM_BK + kk, MM_BK);
          for (int j = 0; j < MM_TN; ++j) simdgroup_load(fb[j], Bs + kk * MM_BN + sn + j * 8, MM_BN);
          for (int i = 0; i < MM_TM; ++i)
            for (int j = 0; j < MM_TN; ++j) simdgroup_multiply_accumulate(part[i][j], fa[i], fb[j], part[i][j]);
        }
#endif
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (!single_chunk && ((k0 + MM_BK) % MM_CHUNK_K == 0 || k0 + MM_BK >= p.K)) {
          for (int i = 0; i < MM_TM; ++i)
            for (int j = 0; j < MM_TN; ++j) {
              simdgroup_multiply_accumulate(acc[i][j], identity, part[i][j], acc[i][j]);
              MM_ZERO(part[i][j]);
            }
        }
      }
    }
  }

  // Epilogue through threadgroup memory (the staging tiles are free now).
  for (int i = 0; i < MM_TM; ++i)
    for (int j = 0; j < MM_TN; ++j) {
      if (single_chunk) simdgroup_store(part[i][j], smem + (sm + i * 8) * MM_BN + sn + j * 8, MM_BN);
      else simdgroup_store(acc[i][j], smem + (sm + i * 8) * MM_BN + sn + j * 8, MM_BN);
    }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const long batch = p.reduce_batches > 1 ? 0 : long(group.z);
  device T* c = C + batch * p.c_bs;
  const device T* s = S + batch * p.s_bs;
  for (int i = int(tid); i < MM_BM * MM_BN; i += MM_THREADS) {
    const int r = i / MM_BN, col = i % MM_BN;
    const long gr = m0 + r, gc = n0 + col;
    if (gr >= p.M || gc >= p.N) continue;
    float v = p.alpha != 0.0f ? p.alpha * smem[i] : 0.0f;
    if (p.round_terms != 0) v = float(T(v));
    if (p.beta != 0.0f) {
      const float bias = p.beta * float(s[gr * p.s_rs + gc * p.s_cs]);
      v += p.round_terms != 0 ? float(T(bias)) : bias;
    }
    c[gr * p.c_rs + gc * p.c_cs] = T(v);
  }
}

// Matrix-vector: y[m] = alpha * sum_k A[m, k] x[k] + beta * s[m]. One thread per row,
// four partial sums (independent chains; the simulator vectorises them).
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
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  long k = 0;
  if (p.alpha != 0.0f) {
    if (p.a_cs == 1 && p.x_s == 1) {
      for (; k + 4 <= p.K; k += 4)
        for (int j = 0; j < 4; ++j) part[j] += float(a[k + j]) * float(x[k + j]);
    }
    for (; k < p.K; ++k) part[0] += float(a[k * p.a_cs]) * float(x[k * p.x_s]);
  }
  const float dot = (part[0] + part[1]) + (part[2] + part[3]);
  float v = p.alpha != 0.0f ? p.alpha * dot : 0.0f;
  if (p.beta != 0.0f) v += p.beta * float(s[long(row) * p.s_s]);
  y[long(row) * p.y_s] = T(v);
}

#define MATMUL_KERNELS(T)                                                                                   \
  template [[host_name("matmul_gemm_" #T)]] kernel void matmul_gemm<T>(                                     \
      const device T*, const device T*, device T*, const device T*, constant MatmulParams&, uint3, uint, uint); \
  template [[host_name("matmul_gemv_" #T)]] kernel void matmul_gemv<T>(                                     \
      const device T*, const device T*, device T*, const device T*, constant GemvParams&, uint);
MATMUL_KERNELS(float)
MATMUL_KERNELS(half)
MATMUL_KERNELS(bfloat)
