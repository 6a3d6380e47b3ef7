// SIMD-group matrices (<metal_simdgroup_matrix>): simdgroup_matrix<T, 8, 8>,
// make_filled_simdgroup_matrix, simdgroup_load / simdgroup_store, simdgroup_multiply
// and simdgroup_multiply_accumulate, thread_elements().
//
// On a GPU the 32 lanes of a SIMD group hold one matrix together (two elements each)
// and every call is made by all of them with the same arguments. The simulator runs
// the lanes one after another on fibers, so gathering 32 lanes for every 8x8 product
// (as simd.h does for simd_sum) would cost 32 fiber switches per 512 multiply-adds.
// Instead each call does its work once, on lane 0 of the SIMD group, which holds the
// whole matrix; the other lanes' matrix objects are placeholders and their calls only
// count. That is exact for every program Metal allows: the arguments are uniform over
// the SIMD group, and memory written by simdgroup_store is only read by other threads
// after a barrier, by which time lane 0 has run.
//
// What Metal requires and the simulator checks: every lane of the SIMD group reaches
// each call. Each lane counts its calls in the header at the top of its fiber stack
// (kabi::LaneHeader, found by masking the frame address: no call, a few instructions);
// the simulator compares the counts of a SIMD group's lanes whenever they meet (barriers,
// SIMD-group functions, the end of the kernel) and fails the dispatch naming the lanes if
// they differ.
//
// thread_elements() exposes a lane's own two elements, in Apple's layout (element_of
// below; MLX's GEMM relies on the same): the first call spreads lane 0's matrix to every lane (a SIMD-group collective), and
// the next matrix call that reads the matrix gathers the lanes' elements back.
#pragma once

#include "target.h"  // METALSIM_VECTOR_BYTES: the panel loop's register blocking

namespace metalsim {
namespace kernel {
namespace detail {

// This thread's LaneHeader (valid only in fiber mode, which every kernel naming a
// simdgroup_* function runs in: the translator classes them as synchronising).
METALSIM_ALWAYS_INLINE kabi::LaneHeader* lane_header() {
  const uintptr_t span = host_api->fiber_stack_span;
  const uintptr_t frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return reinterpret_cast<kabi::LaneHeader*>((frame & ~(span - 1)) + span - kabi::kLaneHeaderBytes);
}

// Counts one SIMD-group matrix call for this lane; true on the lane that does the work.
METALSIM_ALWAYS_INLINE bool matrix_call_here() {
  kabi::LaneHeader* h = lane_header();
  ++h->matrix_calls;
  return h->simd_lane == 0;
}

// The element (row, column) lane `lane` holds in Apple's 8x8 layout: each quad of lanes
// covers two rows' halves; lanes 2k, 2k+1 hold adjacent column pairs.
inline void element_of(uint32_t lane, uint32_t& row, uint32_t& col) {
  const uint32_t quad = lane / 4;
  row = (quad & 4) + (lane / 2) % 4;
  col = (quad & 2) * 2 + (lane % 2) * 2;
}

// 8x8 float multiply-accumulate d = a * b (+ c), rows as 8-float vectors (two SSE or
// one AVX register); d may alias a, b or c (every element of b, c and a is read before
// d is written). Vector loads and stores through pointer casts, not memcpy into arrays:
// GCC keeps the arrays on the stack otherwise (a quarter of the speed with AVX2).
typedef float mat_row8 __attribute__((vector_size(32), aligned(4)));
inline void mma8_f32(float* d, const float* a, const float* b, const float* c) {
  mat_row8 brow[8], acc[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) brow[k] = reinterpret_cast<const mat_row8*>(b)[k];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) acc[i] = c ? reinterpret_cast<const mat_row8*>(c)[i] : mat_row8{};
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) acc[i] += a[8 * i + k] * brow[k];
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) reinterpret_cast<mat_row8*>(d)[i] = acc[i];
}

// Lane 0's part of simdgroup_multiply_accumulate_panel (below): kPanelRows rows x COLS
// columns of the panel's fragments d, starting at row r0 and fragment column j0, kept
// in vector registers of W floats over all k. Per element, the products are added in
// the order of k, one multiply-add each, exactly as the per-fragment calls add them
// (mma8_f32). Blocks per build: AVX-512 (32 registers of 16 floats) 4 rows x 64
// columns (16 accumulators), AVX2 4 x 16 (8 of 8), SSE 2 x 16 (8 of 4); narrower
// blocks cover the fragment columns left over.
#if METALSIM_VECTOR_BYTES >= 64
constexpr unsigned kPanelRows = 4, kPanelWidth = 16, kPanelCols = 64;
#elif METALSIM_VECTOR_BYTES >= 32
constexpr unsigned kPanelRows = 4, kPanelWidth = 8, kPanelCols = 16;
#else
constexpr unsigned kPanelRows = 2, kPanelWidth = 4, kPanelCols = 16;
#endif

// W consecutive floats of row `row`, from fragment column j on: a vector wider than a
// fragment's row (8 floats) takes the same row of the next fragments.
template <unsigned W, class V, class M, unsigned TM, unsigned TN>
METALSIM_ALWAYS_INLINE V panel_load(M (&d)[TM][TN], unsigned row, unsigned j, unsigned col) {
  V v;
  if constexpr (W <= 8) {
    std::memcpy(&v, &d[row / 8][j].e[row % 8][col], sizeof v);
  } else {
#pragma GCC unroll 8
    for (unsigned h = 0; h < W / 8; ++h)
      std::memcpy(reinterpret_cast<float*>(&v) + 8 * h, d[row / 8][j + h].e[row % 8], 32);
  }
  return v;
}
template <unsigned W, class V, class M, unsigned TM, unsigned TN>
METALSIM_ALWAYS_INLINE void panel_store(M (&d)[TM][TN], unsigned row, unsigned j, unsigned col, const V& v) {
  if constexpr (W <= 8) {
    std::memcpy(&d[row / 8][j].e[row % 8][col], &v, sizeof v);
  } else {
#pragma GCC unroll 8
    for (unsigned h = 0; h < W / 8; ++h)
      std::memcpy(d[row / 8][j + h].e[row % 8], reinterpret_cast<const float*>(&v) + 8 * h, 32);
  }
}

template <unsigned COLS, unsigned W, class M, unsigned TM, unsigned TN>
METALSIM_ALWAYS_INLINE void panel_block(M (&d)[TM][TN], const float* a, ulong lda, const float* b, ulong ldb,
                                        uint k, unsigned r0, unsigned j0) {
  typedef float vec_t __attribute__((vector_size(4 * W), aligned(4)));
  constexpr unsigned V = COLS / W;
  vec_t x[kPanelRows][V];
#pragma GCC unroll 4
  for (unsigned r = 0; r < kPanelRows; ++r)
#pragma GCC unroll 4
    for (unsigned v = 0; v < V; ++v)
      x[r][v] = panel_load<W, vec_t>(d, r0 + r, j0 + v * W / 8, v * W % 8);
  const float* ar = a + r0 * lda;
  const float* br = b + j0 * 8;
  for (uint kk = 0; kk < k; ++kk, br += ldb, ++ar) {
    vec_t bv[V];
#pragma GCC unroll 4
    for (unsigned v = 0; v < V; ++v) bv[v] = *reinterpret_cast<const vec_t*>(br + v * W);
#pragma GCC unroll 4
    for (unsigned r = 0; r < kPanelRows; ++r) {
      const float s = ar[r * lda];
#pragma GCC unroll 4
      for (unsigned v = 0; v < V; ++v) x[r][v] += s * bv[v];
    }
  }
#pragma GCC unroll 4
  for (unsigned r = 0; r < kPanelRows; ++r)
#pragma GCC unroll 4
    for (unsigned v = 0; v < V; ++v) panel_store<W>(d, r0 + r, j0 + v * W / 8, v * W % 8, x[r][v]);
}

template <class T>
inline const float* as_f32(const T (&m)[8][8], float (&tmp)[64]) {
  if constexpr (std::is_same<T, float>::value) {
    return &m[0][0];
  } else {
    for (int i = 0; i < 64; ++i) tmp[i] = static_cast<float>(m[i / 8][i % 8]);
    return tmp;
  }
}

// Collectives for thread_elements (rare: the slow path through the simulator).
template <class M>
void resolve_spread(SimdRequest* const* lanes, uint32_t active) {
  if (!(active & 1u)) metalsim::kernel::detail::fail("thread_elements(): lane 0 of the SIMD group did not take part");
  const M& src = *static_cast<const M*>(lanes[0]->in);
  for (uint32_t m = active & ~1u; m; m &= m - 1) std::memcpy(lanes[__builtin_ctz(m)]->out, &src, sizeof(M));
}
template <class M>
void resolve_gather(SimdRequest* const* lanes, uint32_t active) {
  if (!(active & 1u)) metalsim::kernel::detail::fail("simdgroup matrix: lane 0 of the SIMD group did not take part");
  M& dst = *static_cast<M*>(lanes[0]->out);
  for (uint32_t m = active & ~1u; m; m &= m - 1) {
    const uint32_t lane = __builtin_ctz(m);
    const M& src = *static_cast<const M*>(lanes[lane]->in);
    uint32_t r, c;
    element_of(lane, r, c);
    dst.e[r][c] = src.e[r][c];
    dst.e[r][c + 1] = src.e[r][c + 1];
  }
}

}  // namespace detail
}  // namespace kernel
}  // namespace metalsim

namespace metal {

template <class T, unsigned Cols, unsigned Rows>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "the simulator supports 8x8 SIMD-group matrices only, as Apple GPUs do");
  static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value || std::is_same<T, bfloat>::value,
                "SIMD-group matrices hold float, half or bfloat");
  T e[Rows][Cols];      // on lane 0: the matrix; elsewhere a placeholder (see top)
  bool spread = false;  // thread_elements() was used: every lane holds its own elements

  simdgroup_matrix() = default;
  // A diagonal matrix with `diag` on the diagonal (Apple's constructor from a scalar).
  METALSIM_ALWAYS_INLINE simdgroup_matrix(T diag) {
    if (!metalsim::kernel::detail::matrix_call_here()) return;
    for (unsigned r = 0; r < Rows; ++r)
      for (unsigned c = 0; c < Cols; ++c) e[r][c] = r == c ? diag : T(0);
  }

  // This lane's two elements (row-adjacent), as on the GPU.
  METALSIM_ALWAYS_INLINE vec<T, 2>& thread_elements(unsigned line = __builtin_LINE()) {
    if (!spread) {
      metalsim::kernel::detail::simd_call(&metalsim::kernel::detail::resolve_spread<simdgroup_matrix>, this, this,
                                          0, 0, line);
      spread = true;
    }
    uint32_t r, c;
    metalsim::kernel::detail::element_of(metalsim::kernel::detail::lane_header()->simd_lane, r, c);
    return *reinterpret_cast<vec<T, 2>*>(&e[r][c]);
  }

  // Before a call reads the matrix: back to "lane 0 holds it all" (a collective, only
  // after thread_elements()). Uniform over the SIMD group, like the calls themselves.
  METALSIM_ALWAYS_INLINE void gather_(unsigned line) {
    if (!spread) return;
    metalsim::kernel::detail::simd_call(&metalsim::kernel::detail::resolve_gather<simdgroup_matrix>, this, this, 0,
                                        0, line);
    spread = false;
  }
};

typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

template <class T, unsigned Cols, unsigned Rows>
METALSIM_ALWAYS_INLINE simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(const T value) {
  simdgroup_matrix<T, Cols, Rows> m;
  if (metalsim::kernel::detail::matrix_call_here())
    for (unsigned r = 0; r < Rows; ++r)
      for (unsigned c = 0; c < Cols; ++c) m.e[r][c] = value;
  return m;
}

// matrix_origin is (column, row) of the loaded matrix's first element within the large
// matrix it is part of; transpose_matrix reads the large matrix from memory column-major
// (element (row, col) at src[col * elements_per_row + row]).
template <class T, unsigned Cols, unsigned Rows>
METALSIM_ALWAYS_INLINE void simdgroup_load(simdgroup_matrix<T, Cols, Rows>& d, const T* src,
                                           ulong elements_per_row = Cols, ulong2 matrix_origin = ulong2(0),
                                           bool transpose_matrix = false) {
  d.spread = false;
  if (!metalsim::kernel::detail::matrix_call_here()) return;
  const ulong x = matrix_origin.x, y = matrix_origin.y, s = elements_per_row;
  if (!transpose_matrix) {
    const T* p = src + y * s + x;
    for (unsigned r = 0; r < Rows; ++r) std::memcpy(d.e[r], p + r * s, sizeof(d.e[r]));
  } else {
    const T* p = src + x * s + y;
    for (unsigned c = 0; c < Cols; ++c)
      for (unsigned r = 0; r < Rows; ++r) d.e[r][c] = p[c * s + r];
  }
}

// The matrix by reference, not by value as Apple declares it: by value, every store
// copied the whole matrix object (260 bytes) on each of the 32 lanes. A spread matrix
// is gathered in place (lane 0 then holds it all again, which
// is what every other call expects; thread_elements() spreads it again if used).
template <class T, unsigned Cols, unsigned Rows>
METALSIM_ALWAYS_INLINE void simdgroup_store(const simdgroup_matrix<T, Cols, Rows>& matrix, T* dst,
                                            ulong elements_per_row = Cols, ulong2 matrix_origin = ulong2(0),
                                            bool transpose_matrix = false, unsigned line = __builtin_LINE()) {
  simdgroup_matrix<T, Cols, Rows>& a = const_cast<simdgroup_matrix<T, Cols, Rows>&>(matrix);
  a.gather_(line);
  if (!metalsim::kernel::detail::matrix_call_here()) return;
  const ulong x = matrix_origin.x, y = matrix_origin.y, s = elements_per_row;
  if (!transpose_matrix) {
    T* p = dst + y * s + x;
    for (unsigned r = 0; r < Rows; ++r) std::memcpy(p + r * s, a.e[r], sizeof(a.e[r]));
  } else {
    T* p = dst + x * s + y;
    for (unsigned c = 0; c < Cols; ++c)
      for (unsigned r = 0; r < Rows; ++r) p[c * s + r] = a.e[r][c];
  }
}

namespace detail_matrix {
template <class T, class U, class V, class W>
METALSIM_ALWAYS_INLINE void mma(simdgroup_matrix<T, 8, 8>& d, simdgroup_matrix<U, 8, 8>& a,
                                simdgroup_matrix<V, 8, 8>& b, simdgroup_matrix<W, 8, 8>* c, unsigned line) {
  a.gather_(line);
  b.gather_(line);
  if (c) c->gather_(line);
  d.spread = false;
  if (!metalsim::kernel::detail::matrix_call_here()) return;
  float ta[64], tb[64], tc[64];
  const float* pa = metalsim::kernel::detail::as_f32(a.e, ta);
  const float* pb = metalsim::kernel::detail::as_f32(b.e, tb);
  const float* pc = c ? metalsim::kernel::detail::as_f32(c->e, tc) : nullptr;
  if constexpr (std::is_same<T, float>::value) {
    metalsim::kernel::detail::mma8_f32(&d.e[0][0], pa, pb, pc);
  } else {
    float td[64];
    metalsim::kernel::detail::mma8_f32(td, pa, pb, pc);
    for (int i = 0; i < 64; ++i) d.e[i / 8][i % 8] = static_cast<T>(td[i]);
  }
}
}  // namespace detail_matrix

// d = a * b + c, accumulated in float (one rounding to T at the end for half/bfloat).
template <class T, class U, class V, class W>
METALSIM_ALWAYS_INLINE void simdgroup_multiply_accumulate(simdgroup_matrix<T, 8, 8>& d, simdgroup_matrix<U, 8, 8>& a,
                                                          simdgroup_matrix<V, 8, 8>& b, simdgroup_matrix<W, 8, 8>& c,
                                                          unsigned line = __builtin_LINE()) {
  detail_matrix::mma(d, a, b, &c, line);
}

// d = a * b.
template <class T, class U, class V>
METALSIM_ALWAYS_INLINE void simdgroup_multiply(simdgroup_matrix<T, 8, 8>& d, simdgroup_matrix<U, 8, 8>& a,
                                               simdgroup_matrix<V, 8, 8>& b, unsigned line = __builtin_LINE()) {
  detail_matrix::mma(d, a, b, static_cast<simdgroup_matrix<T, 8, 8>*>(nullptr), line);
}

}  // namespace metal

namespace metalsim {

// A simulator extension for a kernel's inner loop (use it under
// `#if defined(METALSIM_VECTOR_BYTES)`, with the plain Metal loop for GPUs): exactly
//   for (kk = 0; kk < k; kk += 8) {
//     simdgroup_float8x8 fa[TM], fb[TN];
//     for (i < TM) simdgroup_load(fa[i], a + i * 8 * lda + kk, lda);
//     for (j < TN) simdgroup_load(fb[j], b + kk * ldb + j * 8, ldb);
//     for (i < TM, j < TN) simdgroup_multiply_accumulate(d[i][j], fa[i], fb[j], d[i][j]);
//   }
// with the same results bit for bit and the same Metal rules: every lane counts all of
// those calls (so a lane that skips this call is still caught as divergent), and a
// matrix of d spread by thread_elements() is gathered first. Lane 0 runs the products
// as one loop over k with the panel's rows held in registers instead of one call per
// 8x8 fragment: the fragment loads and the 31 other lanes' per-call counting were most
// of a simulated GEMM's time (bench/README.md, "Matrix multiply").
template <unsigned TM, unsigned TN>
METALSIM_ALWAYS_INLINE void simdgroup_multiply_accumulate_panel(metal::simdgroup_matrix<float, 8, 8> (&d)[TM][TN],
                                                                const float* a, ulong lda, const float* b, ulong ldb,
                                                                uint k, unsigned line = __builtin_LINE()) {
  static_assert(8 % kernel::detail::kPanelRows == 0, "panel rows must tile a fragment");
  if (k % 8 != 0) kernel::detail::fail("simdgroup_multiply_accumulate_panel: k must be a multiple of 8");
  // Spread matrices are rare: one pass over the flags, and no per-lane stores unless one is.
  bool any_spread = false;
  for (unsigned i = 0; i < TM; ++i)
    for (unsigned j = 0; j < TN; ++j) any_spread |= d[i][j].spread;
  if (any_spread)
    for (unsigned i = 0; i < TM; ++i)
      for (unsigned j = 0; j < TN; ++j) {
        d[i][j].gather_(line);
        d[i][j].spread = false;
      }
  kabi::LaneHeader* h = kernel::detail::lane_header();
  h->matrix_calls += uint64_t(TM + TN + TM * TN) * (k / 8);
  if (h->simd_lane != 0) return;
  using kernel::detail::kPanelCols;
  using kernel::detail::kPanelWidth;
  using kernel::detail::panel_block;
  constexpr unsigned kNarrow = kPanelWidth < 8 ? kPanelWidth : 8;  // a vector within one fragment row
  for (unsigned r0 = 0; r0 < 8 * TM; r0 += kernel::detail::kPanelRows) {
    unsigned j0 = 0;
    for (; j0 + kPanelCols / 8 <= TN; j0 += kPanelCols / 8)
      panel_block<kPanelCols, kPanelWidth>(d, a, lda, b, ldb, k, r0, j0);
    if constexpr (kPanelCols >= 64) {
      if (j0 + 4 <= TN) panel_block<32, kPanelWidth>(d, a, lda, b, ldb, k, r0, j0), j0 += 4;
    }
    if constexpr (kPanelCols >= 32) {
      if (j0 + 2 <= TN) panel_block<16, kPanelWidth>(d, a, lda, b, ldb, k, r0, j0), j0 += 2;
    }
    if (j0 < TN) panel_block<8, kNarrow>(d, a, lda, b, ldb, k, r0, j0);
  }
}

}  // namespace metalsim
