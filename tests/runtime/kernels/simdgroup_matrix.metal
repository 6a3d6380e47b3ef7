// SIMD-group matrix kernels for test_simdgroup_matrix.cpp: each exercises one
// operation of <metal_simdgroup_matrix> for a plain-loop comparison on the host.
// Dispatched with one or two SIMD groups (32 or 64 threads) per threadgroup.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

struct LoadParams {
  uint stride;      // elements per row of the source
  uint origin_x;    // column of the loaded matrix's first element
  uint origin_y;    // its row
  uint transpose;   // load transposed
  uint store_transpose;
};

// dst (8x8, row-major, stride 8) = the matrix simdgroup_load reads from src; stored
// transposed when asked.
kernel void matrix_load_store(const device float* src [[buffer(0)]], device float* dst [[buffer(1)]],
                              constant LoadParams& p [[buffer(2)]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, src, p.stride, ulong2(p.origin_x, p.origin_y), p.transpose != 0);
  simdgroup_store(m, dst, 8, ulong2(0, 0), p.store_transpose != 0);
}

// The same through threadgroup memory: src -> tile (threadgroup) by every lane, then
// the matrix from the tile.
kernel void matrix_load_threadgroup(const device float* src [[buffer(0)]], device float* dst [[buffer(1)]],
                                    uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float tile[16 * 16];
  for (uint i = lane; i < 256; i += 32) tile[i] = src[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 m;
  simdgroup_load(m, tile, 16, ulong2(8, 4), false);
  simdgroup_store(m, dst, 8);
}

// d = a * b + c (accumulate != 0) or a * b, every matrix 8x8 row-major.
template <typename T>
kernel void matrix_multiply(const device T* a [[buffer(0)]], const device T* b [[buffer(1)]],
                            const device T* c [[buffer(2)]], device T* d [[buffer(3)]],
                            constant uint& accumulate [[buffer(4)]]) {
  simdgroup_matrix<T, 8, 8> ma, mb, mc, md;
  simdgroup_load(ma, a);
  simdgroup_load(mb, b);
  simdgroup_load(mc, c);
  if (accumulate != 0) {
    simdgroup_multiply_accumulate(md, ma, mb, mc);
  } else {
    simdgroup_multiply(md, ma, mb);
  }
  simdgroup_store(md, d);
}
template [[host_name("matrix_multiply_float")]] kernel void matrix_multiply<float>(
    const device float*, const device float*, const device float*, device float*, constant uint&);
template [[host_name("matrix_multiply_half")]] kernel void matrix_multiply<half>(
    const device half*, const device half*, const device half*, device half*, constant uint&);
template [[host_name("matrix_multiply_bfloat")]] kernel void matrix_multiply<bfloat>(
    const device bfloat*, const device bfloat*, const device bfloat*, device bfloat*, constant uint&);

// a * a + a in place: the destination is also every operand.
kernel void matrix_multiply_aliased(device float* a [[buffer(0)]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, a);
  simdgroup_multiply_accumulate(m, m, m, m);
  simdgroup_store(m, a);
}

// make_filled_simdgroup_matrix and the diagonal constructor.
kernel void matrix_fill(device float* filled [[buffer(0)]], device float* diagonal [[buffer(1)]]) {
  simdgroup_float8x8 f = make_filled_simdgroup_matrix<float, 8, 8>(3.5f);
  simdgroup_float8x8 d = simdgroup_float8x8(2.0f);
  simdgroup_store(f, filled);
  simdgroup_store(d, diagonal);
}

struct GemmParams {
  uint M, N, K;
  uint lda, ldb, ldc;
};

// C (M x N) = A (M x K) * B (K x N) with M, N, K that need not be multiples of 8: two
// SIMD groups, each owning 8-column strips of C in turn; 8x8 tiles staged in
// threadgroup memory with zero padding at the edges (the partial tiles), accumulated
// over K, stored through a padded tile.
kernel void matrix_tiled_gemm(const device float* A [[buffer(0)]], const device float* B [[buffer(1)]],
                              device float* C [[buffer(2)]], constant GemmParams& p [[buffer(3)]],
                              uint sg [[simdgroup_index_in_threadgroup]],
                              uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float ta[2][64], tb[2][64], tc[2][64];
  const uint row_tiles = (p.M + 7) / 8, col_tiles = (p.N + 7) / 8;
  // Same trip count for both SIMD groups so the barriers match.
  const uint tiles = row_tiles * col_tiles;
  for (uint t0 = 0; t0 < tiles; t0 += 2) {
    const uint t = t0 + sg;
    const bool live = t < tiles;
    const uint r0 = live ? (t / col_tiles) * 8 : 0, c0 = live ? (t % col_tiles) * 8 : 0;
    simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    for (uint k0 = 0; k0 < p.K; k0 += 8) {
      for (uint i = lane; i < 64; i += 32) {
        const uint r = i / 8, c = i % 8;
        ta[sg][i] = (live && r0 + r < p.M && k0 + c < p.K) ? A[(r0 + r) * p.lda + k0 + c] : 0.0f;
        tb[sg][i] = (live && k0 + r < p.K && c0 + c < p.N) ? B[(k0 + r) * p.ldb + c0 + c] : 0.0f;
      }
      simdgroup_barrier(mem_flags::mem_threadgroup);
      simdgroup_float8x8 a, b;
      simdgroup_load(a, ta[sg]);
      simdgroup_load(b, tb[sg]);
      simdgroup_multiply_accumulate(acc, a, b, acc);
      simdgroup_barrier(mem_flags::mem_threadgroup);
    }
    simdgroup_store(acc, tc[sg]);
    simdgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = lane; i < 64; i += 32) {
      const uint r = i / 8, c = i % 8;
      if (live && r0 + r < p.M && c0 + c < p.N) C[(r0 + r) * p.ldc + c0 + c] = tc[sg][i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

// thread_elements(): every lane writes where its two elements sit and their values
// (row, col, value0, value1), then doubles them and the matrix is stored.
// Then each lane adds 1 to its elements again: after the store, which gathered the
// matrix back, thread_elements() must spread the doubled values.
kernel void matrix_thread_elements(const device float* src [[buffer(0)]], device float4* where [[buffer(1)]],
                                   device float* doubled [[buffer(2)]], device float* plus_one [[buffer(3)]],
                                   uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, src);
  float2 v = float2(m.thread_elements());
  where[lane] = float4(0.0f, 0.0f, v.x, v.y);
  m.thread_elements() *= 2.0f;
  simdgroup_store(m, doubled);
  m.thread_elements() += 1.0f;
  simdgroup_store(m, plus_one);
}

// Lanes 16..31 skip a load: divergent, which Metal does not allow.
kernel void matrix_divergent(const device float* src [[buffer(0)]], device float* dst [[buffer(1)]],
                             uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  if (lane < 16) simdgroup_load(m, src);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(m, dst);
}

// The simulator's simdgroup_multiply_accumulate_panel against the per-fragment calls it
// stands for: d (2 x 11 fragments: every block width of the panel, 64, 16 and 8 columns with
// AVX-512, 16 and 8 with AVX2 and SSE) plus
// a (16 x K) times b (K x 88), both from threadgroup memory, once each way; `panel`
// and `fragments` must come out bit for bit equal. Simulator only (a metalsim
// extension; Apple's compiler has no such function).
#if defined(METALSIM_VECTOR_BYTES)
#define kPanelK 24u
#define kPanelN 88u  // 11 fragments
#define kPanelF 11u
kernel void matrix_panel_vs_fragments(const device float* a [[buffer(0)]], const device float* b [[buffer(1)]],
                                      const device float* d0 [[buffer(2)]], device float* panel [[buffer(3)]],
                                      device float* fragments [[buffer(4)]],
                                      uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float ta[16 * kPanelK], tb[kPanelK * kPanelN];
  for (uint i = lane; i < 16 * kPanelK; i += 32) ta[i] = a[i];
  for (uint i = lane; i < kPanelK * kPanelN; i += 32) tb[i] = b[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 p[2][kPanelF], f[2][kPanelF];
  for (uint i = 0; i < 2; ++i)
    for (uint j = 0; j < kPanelF; ++j) {
      simdgroup_load(p[i][j], d0, kPanelN, ulong2(j * 8, i * 8));
      simdgroup_load(f[i][j], d0, kPanelN, ulong2(j * 8, i * 8));
    }
  metalsim::simdgroup_multiply_accumulate_panel(p, ta, kPanelK, tb, kPanelN, kPanelK);
  for (uint kk = 0; kk < kPanelK; kk += 8) {
    simdgroup_float8x8 fa[2], fb[kPanelF];
    for (uint i = 0; i < 2; ++i) simdgroup_load(fa[i], ta + i * 8 * kPanelK + kk, kPanelK);
    for (uint j = 0; j < kPanelF; ++j) simdgroup_load(fb[j], tb + kk * kPanelN + j * 8, kPanelN);
    for (uint i = 0; i < 2; ++i)
      for (uint j = 0; j < kPanelF; ++j) simdgroup_multiply_accumulate(f[i][j], fa[i], fb[j], f[i][j]);
  }
  for (uint i = 0; i < 2; ++i)
    for (uint j = 0; j < kPanelF; ++j) {
      simdgroup_store(p[i][j], panel, kPanelN, ulong2(j * 8, i * 8));
      simdgroup_store(f[i][j], fragments, kPanelN, ulong2(j * 8, i * 8));
    }
}

// Lanes 16..31 skip the panel (which counts as the loads and multiplies it stands
// for): divergent, reported as for any other matrix call.
kernel void matrix_panel_divergent(const device float* src [[buffer(0)]], device float* dst [[buffer(1)]],
                                   uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float t[64];
  for (uint i = lane; i < 64; i += 32) t[i] = src[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 m[1][1];
  m[0][0] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  if (lane < 16) metalsim::simdgroup_multiply_accumulate_panel(m, t, 8, t, 8, 8);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(m[0][0], dst);
}
#endif  // METALSIM_VECTOR_BYTES
