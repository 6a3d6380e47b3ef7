// The strided copy kernels (kernels/copy.metal) through their launcher
// (backend/ops/copy/strided_copy.h), against a host reference with CPU PyTorch's rules:
// every dtype pair with special values and the neg/conj flags, layouts (transposes,
// permutes, gapped slices, offsets, expanded sources, 0-d, empty, 17+ dims), random
// layouts, the blit shortcut, validation, and 64-bit indexing.
#include <chrono>
#include <cstdio>
#include <random>

#include "strided_copy.h"
#include "strided_copy_reference.h"
#include "test_support.h"

namespace metalx::kernels::testing {
namespace {

using rt::testing::dev;
using Bytes = std::vector<unsigned char>;

constexpr DType kAllDTypes[] = {DType::Bool,    DType::UInt8,    DType::Int8,      DType::Int16,
                                DType::Int32,   DType::Int64,    DType::Float16,   DType::BFloat16,
                                DType::Float32, DType::Float64,  DType::Complex64, DType::Complex128};

template <class T>
Bytes bytesOf(std::initializer_list<T> values) {
  Bytes b(values.size() * sizeof(T));
  std::memcpy(b.data(), values.begin(), b.size());
  return b;
}

double f64FromBits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

// Values that exercise each source dtype's conversions: extremes, signed zero, NaN,
// infinities, subnormals, rounding ties.
Bytes specialValues(DType t) {
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity();
  const double dnan = std::numeric_limits<double>::quiet_NaN();
  const double dinf = std::numeric_limits<double>::infinity();
  switch (t) {
    case DType::Bool: return bytesOf<uint8_t>({0, 1});
    case DType::UInt8: return bytesOf<uint8_t>({0, 1, 127, 128, 200, 255});
    case DType::Int8: return bytesOf<int8_t>({0, 1, -1, 100, 127, -128});
    case DType::Int16: return bytesOf<int16_t>({0, -1, 300, -300, 32767, -32768, 255, 256});
    case DType::Int32:
      return bytesOf<int32_t>({0, -7, 65504, 65519, 65520, 16777217, 16777219, 2147483647,
                               -2147483647 - 1});
    case DType::Int64:
      return bytesOf<int64_t>({0, -1, 255, -129, 16777217, (int64_t(1) << 53) + 1,
                               (int64_t(1) << 53) + 3, -((int64_t(1) << 53) + 1),
                               (int64_t(1) << 62) + (int64_t(1) << 9),  // tie in float64: to even
                               (int64_t(1) << 62) + (int64_t(3) << 9),  // tie in float64: up
                               (int64_t(1) << 40) + (int64_t(1) << 16) + 1,
                               std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                               123456789012345678});
    case DType::Float16:
      return bytesOf<_Float16>({_Float16(0.0f), _Float16(-0.0f), _Float16(1.0f), _Float16(-2.5f),
                                _Float16(3.75f), _Float16(65504.0f), _Float16(finf), _Float16(-finf),
                                _Float16(fnan), _Float16(6e-8f), _Float16(-0.333f), _Float16(200.9f)});
    case DType::BFloat16:
      return bytesOf<uint16_t>({0x0000, 0x8000, 0x3F80, 0xC020, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1,
                                0x0001, 0x7F7F, 0x4348 /*200*/, 0xC2C8 /*-100*/});
    case DType::Float32:
      return bytesOf<float>({0.0f, -0.0f, 1.5f, -2.5f, 3.7f, -3.7f, 0.5f, 100.9f, 255.0f, -1.0f,
                             fnan, -fnan, finf, -finf, 1e-45f, -1e-40f, 1.17549435e-38f,
                             3.4028235e38f, 65504.0f, 65519.0f, 65520.0f, 1e-8f, 3e9f, -3e9f,
                             1e19f, 16777217.0f, 0.1f});
    case DType::Float64:
      return bytesOf<double>({0.0, -0.0, 1.5, -2.5, 0.1, -3.7, 255.9, 1e18, -1e18, 4294967296.5,
                              1.0 + std::ldexp(1.0, -24),                        // tie: even (1)
                              1.0 + 3 * std::ldexp(1.0, -24),                    // tie: even (up)
                              1.0 + std::ldexp(1.0, -24) + std::ldexp(1.0, -50), // above tie
                              1.0 - std::ldexp(1.0, -25),                        // tie below 1
                              3.4028235677973366e38,  // FLT_MAX + half an ulp: to inf
                              3.4028234663852886e38,  // FLT_MAX
                              3.4028235e38 * 1.0000000001, 1e300, -1e300,
                              std::numeric_limits<double>::max(), 1e-40, -1e-42,
                              std::ldexp(1.0, -150),        // tie with 0: to 0
                              std::ldexp(1.5, -150),        // to the smallest subnormal
                              std::ldexp(1.5, -149),        // tie between 1 and 2 units: 2
                              std::ldexp(2.5, -149),        // tie between 2 and 3 units: 2
                              std::ldexp(1.0, -126) * (1 - std::ldexp(1.0, -25)),  // to FLT_MIN
                              std::numeric_limits<double>::min(),
                              std::numeric_limits<double>::denorm_min(), -4.9e-324, 1e-46,
                              dnan, -dnan, f64FromBits(0x7FF0000000000001ull),  // signalling NaN
                              f64FromBits(0xFFF4000000000123ull), dinf, -dinf, 65519.99, 65520.0,
                              9007199254740993.0, -9.2233720368547748e18, 1.0e-5});
    case DType::Complex64:
      return bytesOf<c64>({{1.5f, -2.5f}, {0.0f, 1.0f}, {0.0f, 0.0f}, {-0.0f, -0.0f},
                           {fnan, finf}, {3.7f, 1e-45f}, {-200.5f, 7.0f}});
    case DType::Complex128:
      return bytesOf<c128>({{1.5, -2.5}, {0.0, 1.0}, {0.0, 0.0}, {-0.0, -0.0}, {dnan, -dinf},
                            {0.1, 1e-40}, {1.0 + std::ldexp(1.0, -24), std::ldexp(1.5, -150)},
                            {-1e18, 1e300}});
  }
  return {};
}

std::string describe(DType d, DType s, CopyFlags f) {
  return std::string(dtypeName(s)) + " -> " + dtypeName(d) + (f.negate ? " neg" : "") +
         (f.conjugate ? " conj" : "");
}

std::string hex(const unsigned char* p, size_t n) {
  std::string s;
  char buf[4];
  for (size_t i = n; i-- > 0;) {
    std::snprintf(buf, sizeof buf, "%02x", p[i]);
    s += buf;
  }
  return "0x" + s;
}

int64_t numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  return n;
}

// A copy to run and what it must leave in the destination buffer.
struct Case {
  StridedView dst, src;
  CopyFlags flags;
  std::string what;
  // Filled by runAndCheck: where each element lands (byte offset in the destination
  // buffer) with its expected bytes, and the buffer's bytes before the copy.
  std::vector<size_t> offsets;
  Bytes values;  // elementSize(dst.dtype) bytes per offset
  Bytes before;
};

constexpr unsigned char kSentinel = 0xA5;  // destination bytes a copy must not touch

// Allocates a buffer of `bytes` (at least 16) filled with the sentinel.
rt::BufferPtr sentinelBuffer(size_t bytes) {
  auto b = dev().newBuffer(std::max<size_t>(bytes, 16));
  std::memset(b->contents(), kSentinel, b->length());
  return b;
}

// The element-by-element result of the copy, computed on the host.
void expectWrites(Case& c) {
  const StridedView &dst = c.dst, &src = c.src;
  int64_t n = numel(dst.sizes);
  if (n == 0) return;
  auto* sbase = static_cast<const unsigned char*>(src.buffer->contents());
  size_t nd = dst.sizes.size();
  std::vector<int64_t> idx(nd, 0);
  size_t des = elementSize(dst.dtype), ses = elementSize(src.dtype);
  c.offsets.resize(size_t(n));
  c.values.resize(size_t(n) * des);
  for (int64_t k = 0; k < n; ++k) {
    int64_t doff = 0, soff = 0;
    for (size_t d = 0; d < nd; ++d) {
      doff += idx[d] * dst.strides[d];
      soff += idx[d] * src.strides[d];
    }
    refConvert(dst.dtype, c.values.data() + k * des, src.dtype, sbase + src.byte_offset + soff * ses,
               c.flags);
    c.offsets[k] = dst.byte_offset + doff * des;
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < dst.sizes[d]) break;
      idx[d] = 0;
    }
  }
}

class StridedCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    queue = dev().newCommandQueue();
    pipelines = std::make_unique<rt::PipelineCache>(dev());
  }

  // Encodes every case into one command buffer (one compute encoder, as a stream
  // would), runs it, and compares each destination with its expectation.
  void runAndCheck(std::vector<Case>& cases) {
    for (Case& c : cases) {
      expectWrites(c);
      // Untouched bytes are checked for buffers of reasonable size.
      if (c.dst.buffer && c.dst.buffer->length() <= (size_t(64) << 20)) {
        auto* b = static_cast<const unsigned char*>(c.dst.buffer->contents());
        c.before.assign(b, b + c.dst.buffer->length());
      }
    }
    auto cb = rt::testing::runCompute(*queue, [&](rt::ComputeEncoder& enc) {
      for (Case& c : cases) encodeStridedCopy(enc, *pipelines, c.dst, c.src, c.flags);
    });
    ASSERT_EQ(cb->status(), rt::CommandBufferStatus::Completed) << cb->error();
    for (Case& c : cases) checkCase(c);
  }

  void checkCase(const Case& c) {
    if (!c.dst.buffer) return;
    auto* got = static_cast<const unsigned char*>(c.dst.buffer->contents());
    size_t es = elementSize(c.dst.dtype);
    std::vector<bool> in_view(c.before.size(), false);
    for (size_t k = 0; k < c.offsets.size(); ++k) {
      size_t off = c.offsets[k];
      const unsigned char* want = c.values.data() + k * es;
      if (!sameElement(c.dst.dtype, c.src.dtype, got + off, want)) {
        ADD_FAILURE() << c.what << " [" << describe(c.dst.dtype, c.src.dtype, c.flags)
                      << "]: element " << k << " at byte " << off << ": got " << hex(got + off, es)
                      << ", expected " << hex(want, es);
        return;
      }
      if (off + es <= in_view.size()) std::fill(in_view.begin() + off, in_view.begin() + off + es, true);
    }
    // Nothing else changed: gaps, bytes before and after the view.
    for (size_t b = 0; b < c.before.size(); ++b)
      if (!in_view[b] && got[b] != c.before[b]) {
        ADD_FAILURE() << c.what << " [" << describe(c.dst.dtype, c.src.dtype, c.flags)
                      << "]: byte " << b << " outside the destination view was overwritten";
        return;
      }
  }

  rt::CommandQueuePtr queue;
  std::unique_ptr<rt::PipelineCache> pipelines;
};

// ---- every dtype pair ----

TEST_F(StridedCopy, EveryDtypePairWithSpecialValuesAndFlags) {
  const CopyFlags all_flags[] = {{false, false}, {true, false}, {false, true}, {true, true}};
  std::vector<Case> cases;
  for (DType s : kAllDTypes) {
    Bytes values = specialValues(s);
    size_t ses = elementSize(s);
    for (DType d : kAllDTypes) {
      // Only values whose conversion C++ defines (no out-of-range float -> int).
      Bytes kept;
      for (size_t o = 0; o < values.size(); o += ses)
        if (conversionDefined(d, s, values.data() + o))
          kept.insert(kept.end(), values.begin() + o, values.begin() + o + ses);
      int64_t n = int64_t(kept.size() / ses);
      for (CopyFlags f : all_flags) {
        Case c;
        c.src = {rt::testing::bufferFrom(kept.empty() ? Bytes(16) : kept), 0, s, {n}, {1}};
        c.dst = {sentinelBuffer(n * elementSize(d)), 0, d, {n}, {1}};
        c.flags = f;
        c.what = "dtype pair";
        cases.push_back(std::move(c));
      }
    }
  }
  runAndCheck(cases);
}

// The integer-arithmetic conversions (float64, float16, bfloat16, int64 -> float) on
// many bit patterns: every float16, every 997th float32 pattern, random float64
// patterns of every exponent, random int64 of every magnitude.
TEST_F(StridedCopy, ConversionsMatchTheHostOnManyBitPatterns) {
  std::mt19937_64 rng(2024);
  std::vector<uint16_t> halves(65536);
  for (uint32_t i = 0; i < 65536; ++i) halves[i] = uint16_t(i);
  std::vector<uint32_t> floats;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 997) floats.push_back(uint32_t(u));
  for (uint32_t u : {0x477FEFFFu, 0x477FF000u, 0x33000000u, 0x33000001u, 0x387FFFFFu, 0x38800000u,
                     0x3F800000u + 0x1000u, 0x3F800000u + 0x3000u})  // float16 edges and ties
    for (uint32_t sign : {0u, 0x80000000u}) floats.push_back(u | sign);
  std::vector<uint64_t> doubles, longs;
  for (int k = 0; k < 300000; ++k) {
    uint64_t u = rng();
    // Exponents near float32's range (and its subnormals) matter most: bias them there.
    if (k % 2) u = (u & 0x800FFFFFFFFFFFFFull) | (uint64_t(1023 - 160 + rng() % 300) << 52);
    doubles.push_back(u);
    longs.push_back(rng() >> (rng() % 64));
    longs.push_back(-int64_t(rng() >> (rng() % 64)));
  }
  auto view = [](const rt::BufferPtr& b, DType t, size_t n) {
    return StridedView{b, 0, t, {int64_t(n)}, {1}};
  };
  std::vector<Case> cases;
  auto add = [&](DType d, DType s, const Bytes& values) {
    size_t n = values.size() / elementSize(s);
    Bytes kept;  // defined conversions only
    for (size_t i = 0; i < n; ++i)
      if (conversionDefined(d, s, values.data() + i * elementSize(s)))
        kept.insert(kept.end(), values.begin() + i * elementSize(s), values.begin() + (i + 1) * elementSize(s));
    n = kept.size() / elementSize(s);
    Case c;
    c.src = view(rt::testing::bufferFrom(kept), s, n);
    c.dst = view(sentinelBuffer(n * elementSize(d)), d, n);
    c.what = "bit patterns";
    cases.push_back(std::move(c));
  };
  auto raw = [](const auto& v) {
    Bytes b(v.size() * sizeof(v[0]));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  add(DType::Float32, DType::Float16, raw(halves));
  add(DType::Float64, DType::Float16, raw(halves));
  add(DType::Float16, DType::Float32, raw(floats));
  add(DType::BFloat16, DType::Float32, raw(floats));
  add(DType::Float64, DType::Float32, raw(floats));
  add(DType::Int64, DType::Float32, raw(floats));
  add(DType::Float32, DType::Float64, raw(doubles));
  add(DType::Float16, DType::Float64, raw(doubles));
  add(DType::Int64, DType::Float64, raw(doubles));
  add(DType::Int32, DType::Float64, raw(doubles));
  add(DType::Float64, DType::Int64, raw(longs));
  add(DType::Float32, DType::Int64, raw(longs));
  add(DType::Float16, DType::Int64, raw(longs));
  runAndCheck(cases);
}

TEST_F(StridedCopy, KernelNamesFollowTheScheme) {
  EXPECT_EQ(stridedCopyKernelName(DType::Float32, DType::Float32), "copy_strided_4B");
  EXPECT_EQ(stridedCopyKernelName(DType::Bool, DType::Bool), "copy_strided_1B");
  EXPECT_EQ(stridedCopyKernelName(DType::Complex128, DType::Complex128), "copy_strided_16B");
  EXPECT_EQ(stridedCopyKernelName(DType::Float16, DType::Float32), "cast_strided_float_to_half");
  EXPECT_EQ(stridedCopyKernelName(DType::Float32, DType::Float32, {true, false}),
            "cast_strided_float_to_float");
  // conj of a real destination changes nothing: still a bit copy.
  EXPECT_EQ(stridedCopyKernelName(DType::Float64, DType::Float64, {false, true}), "copy_strided_8B");
  EXPECT_EQ(stridedCopyKernelName(DType::Complex64, DType::Complex64, {false, true}),
            "cast_strided_complex64_to_complex64");
  auto lib = dev().builtinLibrary();
  for (DType s : kAllDTypes)
    for (DType d : kAllDTypes) {
      EXPECT_TRUE(lib->hasFunction(stridedCopyKernelName(d, s, {true, false})));
      EXPECT_TRUE(lib->hasFunction(stridedCopyKernelName(d, s)));
    }
}

// ---- layouts ----

// Source data for layout tests: small values every dtype pair converts exactly.
void fillSource(const rt::BufferPtr& b, DType t, uint32_t seed) {
  size_t es = elementSize(t), n = b->length() / es;
  auto* p = static_cast<unsigned char*>(b->contents());
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) {
    int k = int(rng() % 201) - 100;
    withHostType(t, [&](auto tag) {
      using T = decltype(tag);
      T v;
      if constexpr (std::is_same_v<T, bool>) v = (k & 1) != 0;
      else if constexpr (std::is_same_v<T, BF16>) v = bf16FromFloat(float(k) * 0.75f);
      else if constexpr (kIsComplex<T>) v = T(k * 0.75, -k * 0.5);
      else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, _Float16>) v = T(float(k) * 0.75f);
      else v = T(k);
      std::memcpy(p + i * es, &v, es);
    });
  }
}

// A view of `sizes` laid out in memory in the order `perm` (perm[0] outermost), each
// dim stepping by `step[d]` elements of its own extent (gaps), starting `offset`
// elements into a fresh buffer.
StridedView makeView(DType t, const std::vector<int64_t>& sizes, const std::vector<int>& perm,
                     const std::vector<int64_t>& step, int64_t offset, bool source, uint32_t seed) {
  size_t nd = sizes.size();
  std::vector<int64_t> strides(nd, 0);
  int64_t stride = 1;
  for (size_t k = nd; k-- > 0;) {
    int d = perm[k];
    strides[d] = stride * step[d];
    stride *= std::max<int64_t>(sizes[d], 1) * step[d];
  }
  size_t bytes = size_t(offset + stride) * elementSize(t);
  StridedView v;
  v.buffer = source ? dev().newBuffer(std::max<size_t>(bytes, 16)) : sentinelBuffer(bytes);
  if (source) fillSource(v.buffer, t, seed);
  v.byte_offset = size_t(offset) * elementSize(t);
  v.dtype = t;
  v.sizes = sizes;
  v.strides = strides;
  return v;
}

std::vector<int> identityPerm(size_t n) {
  std::vector<int> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = int(i);
  return p;
}

// The dtype pairs each layout runs with: bit copies of every element size, and casts.
struct Pair {
  DType dst, src;
  CopyFlags flags;
};
const Pair kLayoutPairs[] = {
    {DType::Bool, DType::Bool, {}},           {DType::Int16, DType::Int16, {}},
    {DType::Float32, DType::Float32, {}},     {DType::Int64, DType::Int64, {}},
    {DType::Complex128, DType::Complex128, {}}, {DType::Float16, DType::Float32, {}},
    {DType::Float64, DType::Int64, {}},       {DType::Complex128, DType::Complex64, {false, true}},
    {DType::Float32, DType::UInt8, {true, false}}, {DType::BFloat16, DType::Float64, {}},
    {DType::Int8, DType::Complex128, {}},     {DType::Float32, DType::Float32, {true, false}},
};

struct Layout {
  std::string name;
  std::vector<int64_t> sizes;
  std::vector<int> dst_perm, src_perm;
  std::vector<int64_t> dst_step, src_step;
  int64_t dst_offset = 0, src_offset = 0;
  std::vector<int> src_expanded;  // dims with source stride 0
};

std::vector<Layout> namedLayouts() {
  std::vector<Layout> l;
  auto ones = [](size_t n) { return std::vector<int64_t>(n, 1); };
  l.push_back({"contiguous", {37}, {0}, {0}, ones(1), ones(1)});
  l.push_back({"transposed 2-D source", {13, 7}, {0, 1}, {1, 0}, ones(2), ones(2)});
  l.push_back({"transposed 2-D destination", {13, 7}, {1, 0}, {0, 1}, ones(2), ones(2)});
  l.push_back({"NCHW -> NHWC", {2, 5, 6, 7}, {0, 2, 3, 1}, {0, 1, 2, 3}, ones(4), ones(4)});
  l.push_back({"NHWC -> NCHW", {2, 5, 6, 7}, {0, 1, 2, 3}, {0, 2, 3, 1}, ones(4), ones(4)});
  l.push_back({"step-2 slices with offsets", {5, 9}, {0, 1}, {0, 1}, {1, 2}, {2, 2}, 3, 5});
  l.push_back({"gapped destination, transposed source", {4, 6, 3}, {0, 1, 2}, {2, 0, 1}, {2, 1, 2},
               ones(3), 1, 0});
  l.push_back({"expanded source", {5, 6}, {0, 1}, {0, 1}, ones(2), ones(2), 0, 2, {1}});
  l.push_back({"expanded source, all dims", {3, 4, 2}, {0, 1, 2}, {0, 1, 2}, ones(3), ones(3), 0, 1,
               {0, 1, 2}});
  l.push_back({"0-d", {}, {}, {}, {}, {}, 1, 2});
  l.push_back({"empty", {3, 0, 4}, {0, 1, 2}, {2, 1, 0}, ones(3), ones(3)});
  l.push_back({"size-1 dims everywhere", {1, 5, 1, 4, 1}, {0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, ones(5),
               ones(5), 0, 3});
  // A slice of a transpose of a slice: steps on a permuted layout plus an offset.
  l.push_back({"view of a view", {3, 4, 5}, {2, 0, 1}, {1, 2, 0}, {1, 2, 1}, {2, 1, 3}, 7, 4});
  l.push_back({"channels_last slice with gaps", {2, 3, 4, 5}, {0, 2, 3, 1}, {0, 1, 2, 3},
               {1, 2, 1, 1}, {1, 1, 2, 1}, 0, 0});
  return l;
}

TEST_F(StridedCopy, NamedLayoutsEveryElementSizeAndCasts) {
  std::vector<Case> cases;
  uint32_t seed = 1;
  for (const Layout& lay : namedLayouts()) {
    for (const Pair& pr : kLayoutPairs) {
      Case c;
      c.dst = makeView(pr.dst, lay.sizes, lay.dst_perm, lay.dst_step, lay.dst_offset, false, 0);
      c.src = makeView(pr.src, lay.sizes, lay.src_perm, lay.src_step, lay.src_offset, true, seed++);
      for (int d : lay.src_expanded) c.src.strides[d] = 0;
      c.flags = pr.flags;
      c.what = lay.name;
      cases.push_back(std::move(c));
    }
  }
  runAndCheck(cases);
}

// 20 dims of size 2 in reversed memory order: nothing merges, so the launcher splits
// the 4 extra dims into 16 dispatches.
TEST_F(StridedCopy, MoreDimsThanTheKernelTakes) {
  std::vector<Case> cases;
  for (const Pair& pr : {Pair{DType::Float32, DType::Float32, {}}, Pair{DType::Float64, DType::Int16, {true, false}}}) {
    std::vector<int64_t> sizes(20, 2), ones(20, 1);
    std::vector<int> rev(20);
    for (int i = 0; i < 20; ++i) rev[i] = 19 - i;
    Case c;
    c.dst = makeView(pr.dst, sizes, identityPerm(20), ones, 1, false, 0);
    c.src = makeView(pr.src, sizes, rev, ones, 3, true, 99);
    c.flags = pr.flags;
    c.what = "20 unmergeable dims";
    cases.push_back(std::move(c));
  }
  runAndCheck(cases);
}

// Random shapes, permutations, gaps, offsets and expanded dims with random dtype pairs.
TEST_F(StridedCopy, RandomLayoutsAndDtypes) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 4; ++round) {
    std::vector<Case> cases;
    for (int k = 0; k < 100; ++k) {
      size_t nd = rng() % 6;
      std::vector<int64_t> sizes(nd);
      for (auto& s : sizes) s = (rng() % 25 == 0) ? 0 : 1 + int64_t(rng() % 6);
      auto randomPerm = [&] {
        auto p = identityPerm(nd);
        std::shuffle(p.begin(), p.end(), rng);
        return p;
      };
      auto randomSteps = [&] {
        std::vector<int64_t> st(nd);
        for (auto& s : st) s = 1 + int64_t(rng() % 3 == 0);
        return st;
      };
      DType d = kAllDTypes[rng() % 12], s = kAllDTypes[rng() % 12];
      Case c;
      c.dst = makeView(d, sizes, randomPerm(), randomSteps(), rng() % 4, false, 0);
      c.src = makeView(s, sizes, randomPerm(), randomSteps(), rng() % 4, true, uint32_t(rng()));
      for (size_t i = 0; i < nd; ++i)
        if (rng() % 5 == 0) c.src.strides[i] = 0;
      c.flags = {rng() % 3 == 0, rng() % 3 == 0};
      c.what = "random case " + std::to_string(round * 100 + k);
      cases.push_back(std::move(c));
    }
    runAndCheck(cases);
  }
}

// Rows much longer and more numerous than a tile: the tiles and grid-stride loops.
TEST_F(StridedCopy, LargeTransposeAndSlices) {
  std::vector<Case> cases;
  Case c;
  c.dst = makeView(DType::Float32, {3, 300, 700}, {0, 1, 2}, {1, 1, 1}, 0, false, 0);
  c.src = makeView(DType::Float32, {3, 300, 700}, {2, 0, 1}, {1, 1, 1}, 0, true, 5);
  c.what = "large permute";
  cases.push_back(std::move(c));
  Case h;
  h.dst = makeView(DType::Float16, {1000, 999}, {1, 0}, {2, 1}, 3, false, 0);
  h.src = makeView(DType::Float32, {1000, 999}, {0, 1}, {1, 3}, 1, true, 6);
  h.what = "large gapped cast";
  cases.push_back(std::move(h));
  runAndCheck(cases);
}

// ---- the blit shortcut ----

TEST_F(StridedCopy, DenseBitCopiesAreReportedAsBlits) {
  auto buf = dev().newBuffer(4096);
  auto view = [&](DType t, std::vector<int64_t> sizes, std::vector<int64_t> strides, size_t off = 0) {
    return StridedView{buf, off, t, std::move(sizes), std::move(strides)};
  };
  auto range = denseBitCopyRange(view(DType::Float32, {4, 5}, {5, 1}, 16),
                                 view(DType::Float32, {4, 5}, {5, 1}, 400));
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->dst_offset, 16u);
  EXPECT_EQ(range->src_offset, 400u);
  EXPECT_EQ(range->bytes, 80u);
  // Same permuted dense layout on both sides (two channels_last tensors): one range.
  EXPECT_TRUE(isDenseBitCopy(view(DType::Int16, {2, 3, 4}, {1, 8, 2}), view(DType::Int16, {2, 3, 4}, {1, 8, 2}, 100)));
  // Size-1 dims do not matter.
  EXPECT_TRUE(isDenseBitCopy(view(DType::Int8, {1, 6}, {99, 1}), view(DType::Int8, {6, 1}, {1, 1})));
  // conj of a real tensor changes nothing.
  EXPECT_TRUE(isDenseBitCopy(view(DType::Float32, {6}, {1}), view(DType::Float32, {6}, {1}), {false, true}));
  EXPECT_FALSE(isDenseBitCopy(view(DType::Float32, {4, 5}, {1, 4}), view(DType::Float32, {4, 5}, {5, 1})));
  EXPECT_FALSE(isDenseBitCopy(view(DType::Float32, {4, 5}, {5, 1}), view(DType::Int32, {4, 5}, {5, 1})));
  EXPECT_FALSE(isDenseBitCopy(view(DType::Float32, {6}, {1}), view(DType::Float32, {6}, {1}), {true, false}));
  EXPECT_FALSE(isDenseBitCopy(view(DType::Complex64, {6}, {1}), view(DType::Complex64, {6}, {1}), {false, true}));
  EXPECT_FALSE(isDenseBitCopy(view(DType::Float32, {4}, {2}), view(DType::Float32, {4}, {2})));
  EXPECT_FALSE(isDenseBitCopy(view(DType::Float32, {4}, {1}), view(DType::Float32, {4}, {0})));
  EXPECT_FALSE(isDenseBitCopy(view(DType::Float32, {0}, {1}), view(DType::Float32, {0}, {1})));
}

// ---- validation ----

TEST_F(StridedCopy, ContractViolationsAreRejected) {
  auto buf = dev().newBuffer(256);
  auto view = [&](DType t, std::vector<int64_t> sizes, std::vector<int64_t> strides, size_t off = 0) {
    return StridedView{buf, off, t, std::move(sizes), std::move(strides)};
  };
  auto encode = [&](const StridedView& d, const StridedView& s) {
    auto cb = queue->commandBuffer();
    auto enc = cb->computeEncoder();
    try {
      encodeStridedCopy(*enc, *pipelines, d, s);
    } catch (...) {
      enc->endEncoding();
      throw;
    }
    enc->endEncoding();
  };
  using rt::ErrorKind;
  EXPECT_RT_ERROR(encode(view(DType::Float32, {4, 5}, {5, 1}), view(DType::Float32, {5, 4}, {4, 1})),
                  ErrorKind::Validation, "differ in shape");
  EXPECT_RT_ERROR(encode(view(DType::Float32, {4}, {1}), view(DType::Float32, {5}, {1})),
                  ErrorKind::Validation, "different numbers of elements");
  EXPECT_RT_ERROR(encode(view(DType::Float32, {65}, {1}), view(DType::Float32, {65}, {0})),
                  ErrorKind::Validation, "reaches past the end");
  EXPECT_RT_ERROR(encode(view(DType::Float32, {4}, {1}), view(DType::Float32, {4}, {60}, 16)),
                  ErrorKind::Validation, "reaches past the end");
  EXPECT_RT_ERROR(encode(view(DType::Float32, {4}, {-1}, 16), view(DType::Float32, {4}, {1})),
                  ErrorKind::Validation, "negative stride");
  EXPECT_RT_ERROR(encode(view(DType::Float32, {4, 3}, {0, 1}), view(DType::Float32, {4, 3}, {3, 1})),
                  ErrorKind::Validation, "stride 0");
  EXPECT_RT_ERROR(encode(view(DType::Float32, {4}, {1}, 2), view(DType::Float32, {4}, {1})),
                  ErrorKind::Validation, "not a multiple of 4");
  EXPECT_RT_ERROR(encode(view(DType::Float32, {4}, {1, 1}), view(DType::Float32, {4}, {1})),
                  ErrorKind::Validation, "strides");
  // A view with elements needs a buffer; one without needs none.
  EXPECT_RT_ERROR(encode(StridedView{nullptr, 0, DType::Int8, {3}, {1}}, view(DType::Int8, {3}, {1})),
                  ErrorKind::Validation, "no buffer");
  EXPECT_NO_THROW(encode(StridedView{nullptr, 0, DType::Int8, {0, 3}, {3, 1}},
                         StridedView{nullptr, 0, DType::Float32, {0, 3}, {1, 0}}));
}

// ---- 64-bit indexing ----

// Element offsets past 2^32 with few elements: a 4 GiB buffer whose untouched pages
// cost nothing.
TEST_F(StridedCopy, OffsetsPast4GiB) {
  const uint64_t big = (uint64_t(1) << 32) + 64;
  if (dev().info().max_buffer_length < big) GTEST_SKIP() << "device buffers are limited below 4 GiB";
  auto huge = dev().newBuffer(big);
  std::vector<Case> cases;
  Case in;
  in.src = {rt::testing::bufferFrom(Bytes{11, 22, 33, 44, 55, 66, 0, 0}), 0, DType::UInt8, {3, 2}, {2, 1}};
  in.dst = {huge, 5, DType::UInt8, {3, 2}, {int64_t(1) << 31 | 3, 1}};  // last at 2^32 + 11
  in.what = "writes past 4 GiB";
  cases.push_back(std::move(in));
  runAndCheck(cases);
  auto* p = static_cast<unsigned char*>(huge->contents());
  EXPECT_EQ(p[(uint64_t(1) << 31) + 8], 33);
  EXPECT_EQ(p[(uint64_t(1) << 32) + 11], 55);
  EXPECT_EQ(p[(uint64_t(1) << 32) + 12], 66);

  // And reads from there, converting (uint8 -> float32) into a small transposed view.
  std::vector<Case> back;
  Case out;
  out.src = {huge, 5, DType::UInt8, {3, 2}, {int64_t(1) << 31 | 3, 1}};
  out.dst = {sentinelBuffer(64), 8, DType::Float32, {3, 2}, {1, 3}};
  out.what = "reads past 4 GiB";
  back.push_back(std::move(out));
  runAndCheck(back);
}

// More than 2^32 elements in one copy (4 GiB of uint8 written, twice): the grid-stride
// loops and 64-bit tile arithmetic in x (1-D) and in y (rows beyond the grid's height).
TEST_F(StridedCopy, MoreThan2To32Elements) {
  const uint64_t n = (uint64_t(1) << 32) + 5;
  if (dev().info().max_buffer_length < n + 256) GTEST_SKIP() << "device buffers are limited below 4 GiB";
  auto t0 = std::chrono::steady_clock::now();
  auto dst = dev().newBuffer(n + 256);
  auto* p = static_cast<unsigned char*>(dst->contents());
  Bytes pattern(256);
  for (int i = 0; i < 256; ++i) pattern[i] = uint8_t(i * 7 + 1);
  auto src = rt::testing::bufferFrom(pattern);

  // 1-D: an expanded single byte into 2^32 + 5 elements.
  StridedView d1{dst, 1, DType::UInt8, {int64_t(n)}, {1}};
  StridedView s1{src, 3, DType::UInt8, {int64_t(n)}, {0}};
  auto cb = rt::testing::runCompute(*queue, [&](rt::ComputeEncoder& e) { encodeStridedCopy(e, *pipelines, d1, s1); });
  ASSERT_EQ(cb->status(), rt::CommandBufferStatus::Completed) << cb->error();
  EXPECT_EQ(p[0], 0);
  for (uint64_t i : {uint64_t(1), uint64_t(2), uint64_t(1) << 31, (uint64_t(1) << 32) - 1,
                     uint64_t(1) << 32, n - 1, n})
    ASSERT_EQ(p[i], pattern[3]) << "byte " << i;
  EXPECT_EQ(p[n + 1], 0);

  // 2-D: rows of the pattern, 2^24 + 1 rows of 256: more rows than the grid's height.
  const int64_t rows = (int64_t(1) << 24) + 1;
  StridedView d2{dst, 0, DType::UInt8, {rows, 256}, {256, 1}};
  StridedView s2{src, 0, DType::UInt8, {rows, 256}, {0, 1}};
  cb = rt::testing::runCompute(*queue, [&](rt::ComputeEncoder& e) { encodeStridedCopy(e, *pipelines, d2, s2); });
  ASSERT_EQ(cb->status(), rt::CommandBufferStatus::Completed) << cb->error();
  std::mt19937_64 rng(7);
  for (int k = 0; k < 100000; ++k) {
    uint64_t i = rng() % (uint64_t(rows) * 256);
    ASSERT_EQ(p[i], pattern[i % 256]) << "byte " << i;
  }
  for (uint64_t i = uint64_t(rows - 1) * 256; i < uint64_t(rows) * 256; ++i)
    ASSERT_EQ(p[i], pattern[i % 256]) << "byte " << i;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info     ] two 4 GiB strided copies and checks took %.2f s\n", secs);
}

}  // namespace
}  // namespace metalx::kernels::testing
