// The simulator's exp, exp2, log, log2 and tanh (metalsim_prelude/math_branchless.h,
// straight-line code so kernel loops vectorise) against double-precision libm: at most
// 2 ulp off in float over a sweep of the whole float range (MSL's precise bounds are 4
// ulp, 5 for tanh), exact IEEE special values, and half results within one half ulp of
// the correctly rounded ones.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "test_support.h"

namespace metalx::rt::testing {
namespace {

constexpr char kMathKernels[] = "prelude_math.metal";
enum Fn : uint32_t { kExp, kExp2, kLog, kLog2, kTanh };
constexpr const char* kNames[] = {"exp", "exp2", "log", "log2", "tanh"};

double reference(uint32_t fn, double x) {
  switch (fn) {
    case kExp: return std::exp(x);
    case kExp2: return std::exp2(x);
    case kLog: return std::log(x);
    case kLog2: return std::log2(x);
    default: return std::tanh(x);
  }
}

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The spacing of floats at the float nearest to `ref` (subnormal spacing below 2^-126).
double floatUlp(double ref) {
  const double a = std::fabs(ref);
  if (a < 0x1p-126) return 0x1p-149;
  int e;
  std::frexp(a, &e);
  return std::ldexp(1.0, e - 24);
}

// Runs one of the kernels of prelude_math.metal over `src`.
class PreludeMath : public KernelFileTest<kMathKernels> {
 protected:
  template <class T>
  std::vector<T> run(const char* kernel, const std::vector<T>& src, uint32_t fn) {
    auto pipe = pipeline(kernel);
    auto in = bufferFrom(src);
    auto out = dev().newBuffer(src.size() * sizeof(T));
    auto cb = runCompute(*queue, [&](ComputeEncoder& e) {
      e.setComputePipeline(pipe);
      e.setBuffer(in, 0, 0);
      e.setBuffer(out, 0, 1);
      e.setBytes(&fn, sizeof fn, 2);
      e.dispatchThreads({src.size(), 1, 1}, {256, 1, 1});
    });
    EXPECT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
    return read<T>(out, src.size());
  }
};

TEST_F(PreludeMath, FloatWithinTwoUlpOverTheWholeRange) {
  // Every 4093rd bit pattern (both signs, subnormals, NaNs and infinities included).
  std::vector<float> src;
  for (uint64_t u = 0; u < (1ull << 32); u += 4093) src.push_back(fromBits(static_cast<uint32_t>(u)));
  for (uint32_t fn = kExp; fn <= kTanh; ++fn) {
    const auto got = run("float_math", src, fn);
    double worst = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      const double want = reference(fn, src[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[i])) << kNames[fn] << "(" << src[i] << ") = " << got[i];
        continue;
      }
      const float rounded = static_cast<float>(want);
      if (std::isinf(rounded)) {
        ASSERT_EQ(got[i], rounded) << kNames[fn] << "(" << std::hexfloat << src[i] << ")";
        continue;
      }
      const double err = std::fabs(got[i] - want) / floatUlp(want);
      ASSERT_LE(err, 2.0) << kNames[fn] << "(" << std::hexfloat << src[i] << ") = " << got[i] << ", want "
                          << want;
      worst = std::max(worst, err);
    }
    // A sweep that never reached the polynomials' error would prove little.
    EXPECT_GT(worst, 0.4) << kNames[fn];
  }
}

TEST_F(PreludeMath, FloatSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> src = {0.0f, -0.0f, inf, -inf, nan, 1.0f, 89.0f, -104.0f, 0x1p-149f, 8.0f, -1.0f};
  const auto e = run("float_math", src, kExp);
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[1], 1.0f);
  EXPECT_EQ(e[2], inf);
  EXPECT_EQ(e[3], 0.0f);
  EXPECT_FALSE(std::signbit(e[3]));
  EXPECT_TRUE(std::isnan(e[4]));
  EXPECT_EQ(e[6], inf);   // overflow
  EXPECT_EQ(e[7], 0.0f);  // underflow past the smallest subnormal
  const auto e2 = run("float_math", src, kExp2);
  EXPECT_EQ(e2[5], 2.0f);
  EXPECT_EQ(e2[8], 1.0f);
  EXPECT_EQ(e2[3], 0.0f);
  const std::vector<float> pow2 = {-149.0f, -130.0f, -126.0f, 10.0f, 127.0f, 128.0f};
  const auto p = run("float_math", pow2, kExp2);  // exact powers of two, subnormals too
  for (size_t i = 0; i < pow2.size(); ++i) EXPECT_EQ(p[i], std::exp2(pow2[i])) << pow2[i];
  const auto l = run("float_math", src, kLog);
  EXPECT_EQ(l[0], -inf);
  EXPECT_EQ(l[1], -inf);
  EXPECT_EQ(l[2], inf);
  EXPECT_TRUE(std::isnan(l[3]));
  EXPECT_TRUE(std::isnan(l[4]));
  EXPECT_EQ(l[5], 0.0f);
  EXPECT_TRUE(std::isnan(l[10]));
  const auto l2 = run("float_math", src, kLog2);
  EXPECT_EQ(l2[8], -149.0f);  // the smallest subnormal
  EXPECT_EQ(l2[9], 3.0f);
  EXPECT_EQ(l2[0], -inf);
  EXPECT_TRUE(std::isnan(l2[10]));
  const auto t = run("float_math", src, kTanh);
  EXPECT_EQ(t[0], 0.0f);
  EXPECT_FALSE(std::signbit(t[0]));
  EXPECT_EQ(t[1], 0.0f);
  EXPECT_TRUE(std::signbit(t[1]));
  EXPECT_EQ(t[2], 1.0f);
  EXPECT_EQ(t[3], -1.0f);
  EXPECT_TRUE(std::isnan(t[4]));
  EXPECT_EQ(t[6], 1.0f);
  EXPECT_EQ(t[7], -1.0f);
  EXPECT_EQ(t[8], 0x1p-149f);
}

// half inputs: every finite half against the double result rounded to half; the float
// computation's error may flip that rounding only when the exact value is within 2 float
// ulp of a half rounding boundary, so allow one half ulp.
TEST_F(PreludeMath, HalfWithinOneHalfUlp) {
  // The host's half is GCC/Clang's _Float16 (x86-64 and arm64 have it).
  std::vector<_Float16> src;
  for (uint32_t u = 0; u < 0x10000; ++u) {
    const auto bits = static_cast<uint16_t>(u);
    _Float16 h;
    std::memcpy(&h, &bits, sizeof h);
    if (std::isfinite(static_cast<float>(h))) src.push_back(h);
  }
  for (uint32_t fn = kExp; fn <= kTanh; ++fn) {
    const auto got = run("half_math", src, fn);
    for (size_t i = 0; i < src.size(); ++i) {
      const float x = static_cast<float>(src[i]);
      const double want = reference(fn, x);
      const float g = static_cast<float>(got[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(g)) << kNames[fn] << "(" << x << ")";
        continue;
      }
      const _Float16 want_h = static_cast<_Float16>(want);
      uint16_t gb, wb;
      std::memcpy(&gb, &got[i], sizeof gb);
      std::memcpy(&wb, &want_h, sizeof wb);
      ASSERT_EQ(gb >> 15, wb >> 15) << kNames[fn] << "(" << x << ") = " << g;
      ASSERT_LE(std::abs(int(gb) - int(wb)), 1) << kNames[fn] << "(" << x << ") = " << g << ", want "
                                                << static_cast<float>(want_h);
    }
  }
}

}  // namespace
}  // namespace metalx::rt::testing
