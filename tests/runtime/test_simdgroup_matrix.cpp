// SIMD-group matrices on the simulator (metalsim_prelude/simdgroup_matrix.h): each
// operation against plain loops on the host, including transposed and offset loads,
// half/bfloat arithmetic, aliasing, partial tiles through threadgroup memory,
// thread_elements(), the simulator's panel helper (bit for bit the per-fragment calls),
// and the error for lanes that do not all reach a call.
#include <cmath>
#include <cstdint>
#include <random>

#include "test_support.h"

namespace metalx::rt::testing {
namespace {

constexpr char kMatrixKernels[] = "simdgroup_matrix.metal";
// The helpers below take the fixture: its pipeline() and queue made reachable.
class SimdgroupMatrix : public KernelFileTest<kMatrixKernels> {
 public:
  using KernelFileTest::pipeline;
  using KernelFileTest::queue;
};

std::vector<float> randomValues(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

struct LoadParams {
  uint32_t stride, origin_x, origin_y, transpose, store_transpose;
};

std::vector<float> loadStore(SimdgroupMatrix& t, const std::vector<float>& src, LoadParams p) {
  auto pipe = t.pipeline("matrix_load_store");
  auto in = bufferFrom(src);
  auto out = dev().newBuffer(64 * sizeof(float));
  auto cb = runCompute(*t.queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(pipe);
    e.setBuffer(in, 0, 0);
    e.setBuffer(out, 0, 1);
    e.setBytes(&p, sizeof p, 2);
    e.dispatchThreadgroups({1, 1, 1}, {32, 1, 1});
  });
  EXPECT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  return read<float>(out, 64);
}

TEST_F(SimdgroupMatrix, LoadWithStrideOriginAndTransposeMatchesLoops) {
  const uint32_t stride = 13;
  const auto src = randomValues(stride * 20, 1);
  for (uint32_t transpose : {0u, 1u})
    for (uint32_t store_transpose : {0u, 1u}) {
      LoadParams p{stride, 3, 5, transpose, store_transpose};
      const auto got = loadStore(*this, src, p);
      for (uint32_t r = 0; r < 8; ++r)
        for (uint32_t c = 0; c < 8; ++c) {
          // Element (r, c) of the loaded matrix: the block at (row 5, col 3) of the large
          // matrix, which is stored column-major when transposed.
          const uint32_t R = p.origin_y + r, C = p.origin_x + c;
          const float want = transpose ? src[C * stride + R] : src[R * stride + C];
          const float stored = store_transpose ? got[c * 8 + r] : got[r * 8 + c];
          ASSERT_EQ(stored, want) << "transpose " << transpose << " store_transpose " << store_transpose
                                  << " at " << r << "," << c;
        }
    }
}

TEST_F(SimdgroupMatrix, LoadFromThreadgroupMemory) {
  const auto src = randomValues(256, 2);
  auto pipe = pipeline("matrix_load_threadgroup");
  auto in = bufferFrom(src);
  auto out = dev().newBuffer(64 * sizeof(float));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(pipe);
    e.setBuffer(in, 0, 0);
    e.setBuffer(out, 0, 1);
    e.dispatchThreadgroups({1, 1, 1}, {32, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  const auto got = read<float>(out, 64);
  for (uint32_t r = 0; r < 8; ++r)
    for (uint32_t c = 0; c < 8; ++c) ASSERT_EQ(got[r * 8 + c], src[(4 + r) * 16 + 8 + c]);
}

// Host reference: d = a * b (+ c), accumulated in double.
std::vector<double> reference(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>* c) {
  std::vector<double> d(64);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      double s = c ? (*c)[i * 8 + j] : 0.0;
      for (int k = 0; k < 8; ++k) s += double(a[i * 8 + k]) * b[k * 8 + j];
      d[i * 8 + j] = s;
    }
  return d;
}

// Element codecs for the three matrix types (bfloat: the high half of a float,
// rounded to nearest even).
struct F32 {
  using Bits = float;
  static Bits encode(float x) { return x; }
  static float decode(Bits b) { return b; }
};
struct F16 {
  using Bits = _Float16;
  static Bits encode(float x) { return static_cast<_Float16>(x); }
  static float decode(Bits b) { return static_cast<float>(b); }
};
struct BF16 {
  using Bits = uint16_t;
  static Bits encode(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  static float decode(Bits b) {
    uint32_t u = uint32_t(b) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  }
};

template <class Codec>
void checkMultiply(SimdgroupMatrix& t, const char* kernel, double tolerance) {
  auto pipe = t.pipeline(kernel);
  // Inputs rounded to the type first, so the reference sees what the kernel sees.
  std::vector<float> a = randomValues(64, 3), b = randomValues(64, 4), c = randomValues(64, 5);
  std::vector<typename Codec::Bits> ea(64), eb(64), ec(64);
  for (int i = 0; i < 64; ++i) {
    ea[i] = Codec::encode(a[i]), eb[i] = Codec::encode(b[i]), ec[i] = Codec::encode(c[i]);
    a[i] = Codec::decode(ea[i]), b[i] = Codec::decode(eb[i]), c[i] = Codec::decode(ec[i]);
  }
  auto ba = bufferFrom(ea), bb = bufferFrom(eb), bc = bufferFrom(ec);
  for (uint32_t accumulate : {0u, 1u}) {
    auto out = dev().newBuffer(64 * sizeof(typename Codec::Bits));
    auto cb = runCompute(*t.queue, [&](ComputeEncoder& e) {
      e.setComputePipeline(pipe);
      e.setBuffer(ba, 0, 0);
      e.setBuffer(bb, 0, 1);
      e.setBuffer(bc, 0, 2);
      e.setBuffer(out, 0, 3);
      e.setBytes(&accumulate, sizeof accumulate, 4);
      e.dispatchThreadgroups({1, 1, 1}, {32, 1, 1});
    });
    ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
    const auto want = reference(a, b, accumulate ? &c : nullptr);
    const auto got = read<typename Codec::Bits>(out, 64);
    for (int i = 0; i < 64; ++i)
      ASSERT_NEAR(Codec::decode(got[i]), want[i], tolerance * (1.0 + std::fabs(want[i])))
          << kernel << " accumulate " << accumulate << " element " << i;
  }
}

TEST_F(SimdgroupMatrix, MultiplyAndMultiplyAccumulateFloat) { checkMultiply<F32>(*this, "matrix_multiply_float", 1e-6); }
// One rounding of a float accumulation to the type: within half an ulp (2^-11, 2^-8).
TEST_F(SimdgroupMatrix, MultiplyAndMultiplyAccumulateHalf) { checkMultiply<F16>(*this, "matrix_multiply_half", 6e-4); }
TEST_F(SimdgroupMatrix, MultiplyAndMultiplyAccumulateBfloat) {
  checkMultiply<BF16>(*this, "matrix_multiply_bfloat", 4.5e-3);
}

TEST_F(SimdgroupMatrix, MultiplyAccumulateInPlaceReadsOperandsBeforeWriting) {
  const auto a = randomValues(64, 6);
  auto buf = bufferFrom(a);
  auto pipe = pipeline("matrix_multiply_aliased");
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(pipe);
    e.setBuffer(buf, 0, 0);
    e.dispatchThreadgroups({1, 1, 1}, {32, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  const auto want = reference(a, a, &a);
  const auto got = read<float>(buf, 64);
  for (int i = 0; i < 64; ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::fabs(want[i])));
}

TEST_F(SimdgroupMatrix, FilledAndDiagonalMatrices) {
  auto filled = dev().newBuffer(64 * sizeof(float)), diagonal = dev().newBuffer(64 * sizeof(float));
  auto pipe = pipeline("matrix_fill");
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(pipe);
    e.setBuffer(filled, 0, 0);
    e.setBuffer(diagonal, 0, 1);
    e.dispatchThreadgroups({1, 1, 1}, {32, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  const auto f = read<float>(filled, 64), d = read<float>(diagonal, 64);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(f[i], 3.5f);
    EXPECT_EQ(d[i], i / 8 == i % 8 ? 2.0f : 0.0f);
  }
}

struct GemmParams {
  uint32_t M, N, K, lda, ldb, ldc;
};

TEST_F(SimdgroupMatrix, TiledGemmWithPartialTilesMatchesLoops) {
  auto pipe = pipeline("matrix_tiled_gemm");
  // Shapes that are and are not multiples of 8 (partial tiles at every edge), several
  // threadgroups' worth of tiles for two SIMD groups (an odd count leaves one idle).
  const GemmParams shapes[] = {{8, 8, 8, 8, 8, 8}, {13, 21, 19, 19, 23, 22}, {1, 5, 3, 3, 5, 5}, {24, 9, 40, 40, 9, 9}};
  for (const GemmParams& p : shapes) {
    const auto A = randomValues(size_t(p.M) * p.lda, 7), B = randomValues(size_t(p.K) * p.ldb, 8);
    std::vector<float> C0(size_t(p.M) * p.ldc, -7.0f);
    auto ba = bufferFrom(A), bb = bufferFrom(B), bc = bufferFrom(C0);
    auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
      e.setComputePipeline(pipe);
      e.setBuffer(ba, 0, 0);
      e.setBuffer(bb, 0, 1);
      e.setBuffer(bc, 0, 2);
      e.setBytes(&p, sizeof p, 3);
      e.dispatchThreadgroups({1, 1, 1}, {64, 1, 1});
    });
    ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
    const auto C = read<float>(bc, C0.size());
    for (uint32_t i = 0; i < p.M; ++i)
      for (uint32_t j = 0; j < p.ldc; ++j) {
        if (j >= p.N) {
          ASSERT_EQ(C[i * p.ldc + j], -7.0f) << "padding column written";
          continue;
        }
        double s = 0;
        for (uint32_t k = 0; k < p.K; ++k) s += double(A[i * p.lda + k]) * B[k * p.ldb + j];
        ASSERT_NEAR(C[i * p.ldc + j], s, 1e-5 * (1.0 + std::fabs(s))) << p.M << "x" << p.N << "x" << p.K;
      }
  }
}

TEST_F(SimdgroupMatrix, ThreadElementsFollowAppleLayout) {
  std::vector<float> src(64);
  for (int i = 0; i < 64; ++i) src[i] = float(i);
  auto in = bufferFrom(src);
  auto where = dev().newBuffer(32 * 4 * sizeof(float)), doubled = dev().newBuffer(64 * sizeof(float));
  auto plus_one = dev().newBuffer(64 * sizeof(float));
  auto pipe = pipeline("matrix_thread_elements");
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(pipe);
    e.setBuffer(in, 0, 0);
    e.setBuffer(where, 0, 1);
    e.setBuffer(doubled, 0, 2);
    e.setBuffer(plus_one, 0, 3);
    e.dispatchThreadgroups({1, 1, 1}, {32, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  const auto w = read<float>(where, 128), d = read<float>(doubled, 64), d1 = read<float>(plus_one, 64);
  std::vector<int> seen(64, 0);
  for (int lane = 0; lane < 32; ++lane) {
    const int quad = lane / 4, row = (quad & 4) + (lane / 2) % 4, col = (quad & 2) * 2 + (lane % 2) * 2;
    EXPECT_EQ(w[lane * 4 + 2], float(row * 8 + col)) << "lane " << lane;
    EXPECT_EQ(w[lane * 4 + 3], float(row * 8 + col + 1)) << "lane " << lane;
    ++seen[row * 8 + col], ++seen[row * 8 + col + 1];
  }
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(seen[i], 1) << "element " << i << " owned by one lane";
    EXPECT_EQ(d[i], 2.0f * i);
    EXPECT_EQ(d1[i], 2.0f * i + 1.0f);
  }
}

TEST_F(SimdgroupMatrix, LanesThatSkipACallFailTheCommandBuffer) {
  auto pipe = pipeline("matrix_divergent");
  auto in = bufferFrom(randomValues(64, 9));
  auto out = dev().newBuffer(64 * sizeof(float));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(pipe);
    e.setBuffer(in, 0, 0);
    e.setBuffer(out, 0, 1);
    e.dispatchThreadgroups({1, 1, 1}, {32, 1, 1});
  });
  EXPECT_EQ(cb->status(), CommandBufferStatus::Error);
  EXPECT_NE(cb->error().find("matrix_divergent"), std::string::npos) << cb->error();
  EXPECT_NE(cb->error().find("every lane of a SIMD group must reach each simdgroup_matrix call"), std::string::npos)
      << cb->error();
}

// The panel helper (lane 0 runs a K step of fragments as one blocked loop) must give
// what its per-fragment calls give, bit for bit, and what plain loops give.
TEST_F(SimdgroupMatrix, PanelEqualsPerFragmentCalls) {
  constexpr uint32_t K = 24, N = 88;
  const auto A = randomValues(16 * K, 10), B = randomValues(K * N, 11), D0 = randomValues(16 * N, 12);
  auto ba = bufferFrom(A), bb = bufferFrom(B), bd = bufferFrom(D0);
  auto panel = dev().newBuffer(16 * N * sizeof(float)), fragments = dev().newBuffer(16 * N * sizeof(float));
  auto pipe = pipeline("matrix_panel_vs_fragments");
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(pipe);
    e.setBuffer(ba, 0, 0);
    e.setBuffer(bb, 0, 1);
    e.setBuffer(bd, 0, 2);
    e.setBuffer(panel, 0, 3);
    e.setBuffer(fragments, 0, 4);
    e.dispatchThreadgroups({1, 1, 1}, {32, 1, 1});
  });
  ASSERT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  const auto p = read<float>(panel, 16 * N), f = read<float>(fragments, 16 * N);
  for (uint32_t i = 0; i < 16; ++i)
    for (uint32_t j = 0; j < N; ++j) {
      double s = D0[i * N + j];
      for (uint32_t k = 0; k < K; ++k) s += double(A[i * K + k]) * B[k * N + j];
      ASSERT_EQ(p[i * N + j], f[i * N + j]) << "at " << i << "," << j;
      ASSERT_NEAR(p[i * N + j], s, 1e-5 * (1.0 + std::fabs(s))) << "at " << i << "," << j;
    }
}

TEST_F(SimdgroupMatrix, LanesThatSkipAPanelFailTheCommandBuffer) {
  auto pipe = pipeline("matrix_panel_divergent");
  auto in = bufferFrom(randomValues(64, 13));
  auto out = dev().newBuffer(64 * sizeof(float));
  auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
    e.setComputePipeline(pipe);
    e.setBuffer(in, 0, 0);
    e.setBuffer(out, 0, 1);
    e.dispatchThreadgroups({1, 1, 1}, {32, 1, 1});
  });
  EXPECT_EQ(cb->status(), CommandBufferStatus::Error);
  EXPECT_NE(cb->error().find("every lane of a SIMD group must reach each simdgroup_matrix call"), std::string::npos)
      << cb->error();
}

}  // namespace
}  // namespace metalx::rt::testing
