// Random distributions on the device (kernels/random.metal): uniform_, normal_ (and the
// normal tensor overloads), bernoulli_ (scalar and tensor p), random_, exponential_,
// native_dropout and its backward.
//
// Every op reserves a range of the generator's Philox counter (generator.h) under the
// generator's mutex and passes (seed, offset) to the kernel, so the numbers depend only
// on the generator's state: the same seed gives the same numbers on every run and
// stream, get_rng_state/set_rng_state and fork_rng replay them. Argument checks and
// range arithmetic are torch's own (ATen/native/DistributionTemplates.h), so errors and
// warnings are CPU's. Kernels write dense outputs; a non-contiguous self gets a dense
// temporary copied into it, float64 draws in float32 (int64 for random_) and is copied.
#include <ATen/ATen.h>
#include <ATen/core/DistributionsHelper.h>
#include <ATen/native/DistributionTemplates.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <mutex>

#include "allocator.h"
#include "core/stream_pool.h"
#include "generator.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"

namespace metalx {
namespace {

using launch::KernelFamily;
using launch::Variant;
using kernels::DType;

// Mirrors kernels/random.metal's RandomParams.
struct RandomParams {
  uint64_t count = 0;
  uint64_t group0 = 0;
  uint64_t range = 0;
  int64_t base = 0;
  uint32_t seed_lo = 0, seed_hi = 0;
  float a = 0, b = 0;
  uint32_t wide = 0;
  uint32_t unused = 0;
};
static_assert(sizeof(RandomParams) == 56, "RandomParams must match kernels/random.metal");

KernelFamily uniformKernels("random_uniform", launch::kFloatTypes);
KernelFamily normalKernels("random_normal", launch::kFloatTypes);
KernelFamily exponentialKernels("random_exponential", launch::kFloatTypes);
KernelFamily dropoutKernels("random_dropout", launch::kFloatTypes);
KernelFamily bernoulliKernels("random_bernoulli", launch::kAllTypes);
KernelFamily bernoulliTensorKernels("random_bernoulli_tensor", launch::kAllTypes);
KernelFamily rangeKernels("random_range", launch::kAllTypes);

// Reserves `words` 32-bit numbers of the counter of `gen` (or the device's default
// generator) and writes the resulting seed and first group into `p`.
void reserveWords(RandomParams& p, const std::optional<at::Generator>& gen, const at::Tensor& self, uint64_t words) {
  auto* g = at::get_generator_or_default<MetalxGeneratorImpl>(gen, defaultGenerator(self.device().index()));
  MetalxGeneratorImpl::PhiloxInputs in;
  {
    std::lock_guard<std::mutex> lock(g->mutex_);
    in = g->reserve(words);
  }
  p.seed_lo = static_cast<uint32_t>(in.seed);
  p.seed_hi = static_cast<uint32_t>(in.seed >> 32);
  p.group0 = in.offset / 4;
}

// Runs `kernels` for dtype `dtype` over the dense tensor `out` (buffer 0), the dense
// tensors `extra` (buffers 1...) and `p` after them. `per_group`: elements one Philox
// call serves.
void launchRandom(KernelFamily& kernels, DType dtype, const at::Tensor& out, RandomParams& p,
                  std::initializer_list<at::Tensor> extra = {}, uint64_t per_group = 4) {
  p.count = static_cast<uint64_t>(out.numel());
  const uint64_t groups = (p.count + per_group - 1) / per_group;
  if (groups == 0) return;
  Stream& stream = currentStream(out.device().index());
  std::array<const at::Tensor*, 3> bound{&out};
  size_t n = 1;
  for (const at::Tensor& t : extra) bound.at(n++) = &t;
  launch::encodeKernel(stream, kernels.pipeline(stream, Variant::Plain, dtype), {bound.data(), n}, p,
                       launch::Grid::threads(std::min<uint64_t>(groups, launch::kGridStrideThreads)));
}

std::optional<DType> kernelTypeOf(const at::Tensor& t, const KernelFamily& kernels) {
  auto d = launch::storageDtype(t.scalar_type());
  if (d && kernels.supports(*d)) return d;
  return std::nullopt;
}

// Runs fill(dense) on `self` itself when it is dense in row-major order, else on a
// dense temporary of dtype `dtype` then copied into self.
template <class Fill>
void fillDense(const at::Tensor& self, c10::ScalarType dtype, Fill&& fill) {
  if (self.is_contiguous() && self.scalar_type() == dtype) {
    fill(self);
    return;
  }
  at::Tensor dense = at::empty(self.sizes(), self.options().dtype(dtype));
  fill(dense);
  at::Tensor(self).copy_(dense);
}

// A floating distribution drawn in `self`'s type, or in float32 for float64.
template <class Set>
void floatDistribution(KernelFamily& kernels, const at::Tensor& self, uint64_t words_per_element,
                       const std::optional<at::Generator>& gen, Set&& set) {
  const c10::ScalarType draw = kernelTypeOf(self, kernels) ? self.scalar_type() : at::kFloat;
  fillDense(self, draw, [&](const at::Tensor& dense) {
    RandomParams p;
    set(p);
    reserveWords(p, gen, dense, words_per_element * static_cast<uint64_t>(dense.numel()));
    launchRandom(kernels, *launch::storageDtype(draw), dense, p);
  });
}

// The kernels torch's templates call, on the iterator's (only) operand.
template <typename RNG>
struct UniformKernel {
  void operator()(at::TensorIteratorBase& iter, double from, double to, std::optional<at::Generator> gen) {
    floatDistribution(uniformKernels, iter.tensor(0), 1, gen, [&](RandomParams& p) {
      p.a = static_cast<float>(from);
      p.b = static_cast<float>(to);
    });
  }
};

template <typename RNG>
struct NormalKernel {
  void operator()(const at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
    floatDistribution(normalKernels, self, 1, gen, [&](RandomParams& p) {
      p.a = static_cast<float>(mean);
      p.b = static_cast<float>(std);
    });
  }
};

template <typename RNG>
struct ExponentialKernel {
  void operator()(at::TensorIteratorBase& iter, double lambda, std::optional<at::Generator> gen) {
    floatDistribution(exponentialKernels, iter.tensor(0), 1, gen,
                      [&](RandomParams& p) { p.a = static_cast<float>(lambda); });
  }
};

// Values in [base, base + range) (range 0: all of int64) in self's dtype: types without
// a kernel (float64, the wide unsigned types) draw int64 and convert.
void fillRange(const at::Tensor& self, uint64_t range, int64_t base, const std::optional<at::Generator>& gen) {
  const c10::ScalarType draw = kernelTypeOf(self, rangeKernels) ? self.scalar_type() : at::kLong;
  fillDense(self, draw, [&](const at::Tensor& dense) {
    RandomParams p;
    p.range = range;
    p.base = base;
    p.wide = range == 0 || range > (uint64_t{1} << 32) ? 1 : 0;
    const uint64_t n = static_cast<uint64_t>(dense.numel());
    reserveWords(p, gen, dense, p.wide ? 2 * n : n);
    launchRandom(rangeKernels, *launch::storageDtype(draw), dense, p, {}, p.wide ? 2 : 4);
  });
}

template <typename RNG>
struct RandomFromToKernel {
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t base, std::optional<at::Generator> gen) {
    fillRange(iter.tensor(0), range, base, gen);
  }
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    fillRange(iter.tensor(0), 0, std::numeric_limits<int64_t>::lowest(), gen);
  }
};

template <typename RNG>
struct BernoulliScalarKernel {
  void operator()(const at::Tensor& self, double p_value, std::optional<at::Generator> gen) {
    const c10::ScalarType draw = kernelTypeOf(self, bernoulliKernels) ? self.scalar_type() : at::kFloat;
    fillDense(self, draw, [&](const at::Tensor& dense) {
      RandomParams p;
      p.a = static_cast<float>(p_value);
      reserveWords(p, gen, dense, static_cast<uint64_t>(dense.numel()));
      launchRandom(bernoulliKernels, *launch::storageDtype(draw), dense, p);
    });
  }
};

template <typename RNG>
struct BernoulliTensorKernel {
  void operator()(const at::Tensor& self, const at::Tensor& p_, std::optional<at::Generator> gen) {
    TORCH_CHECK(p_.device() == self.device() || p_.dim() == 0,
                "Expected all tensors to be on the same device, but found at least two devices, ", self.device(),
                " and ", p_.device(), "!");
    TORCH_CHECK(at::isFloatingType(p_.scalar_type()), "expected probabilities tensor to have floating type, got ",
                p_.scalar_type());
    const c10::ScalarType draw = kernelTypeOf(self, bernoulliTensorKernels) ? self.scalar_type() : at::kFloat;
    // One float probability per element of self, as CPU broadcasts p to self.
    at::Tensor probs = p_.to(self.device(), at::kFloat).expand(self.sizes()).contiguous();
    fillDense(self, draw, [&](const at::Tensor& dense) {
      RandomParams p;
      reserveWords(p, gen, dense, static_cast<uint64_t>(dense.numel()));
      launchRandom(bernoulliTensorKernels, *launch::storageDtype(draw), dense, p, {probs});
    });
  }
};

struct Unused {};

at::Tensor& uniformInplace(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  return at::native::templates::uniform_impl_<UniformKernel, Unused>(self, from, to, std::move(gen));
}

at::Tensor& normalInplace(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return at::native::templates::normal_impl_<NormalKernel, Unused>(self, mean, std, std::move(gen));
}

at::Tensor normalTensorFloat(const at::Tensor& mean, double std, std::optional<at::Generator> gen) {
  return at::native::templates::normal_impl<NormalKernel, Unused>(mean, std, std::move(gen));
}
at::Tensor normalFloatTensor(double mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  return at::native::templates::normal_impl<NormalKernel, Unused>(mean, std, std::move(gen));
}
at::Tensor normalTensorTensor(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  return at::native::templates::normal_impl<NormalKernel, Unused>(mean, std, std::move(gen));
}
at::Tensor& normalTensorFloatOut(const at::Tensor& mean, double std, std::optional<at::Generator> gen,
                                 at::Tensor& out) {
  return at::native::templates::normal_out_impl<NormalKernel, Unused>(out, mean, std, std::move(gen));
}
at::Tensor& normalFloatTensorOut(double mean, const at::Tensor& std, std::optional<at::Generator> gen,
                                 at::Tensor& out) {
  return at::native::templates::normal_out_impl<NormalKernel, Unused>(out, mean, std, std::move(gen));
}
at::Tensor& normalTensorTensorOut(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen,
                                  at::Tensor& out) {
  return at::native::templates::normal_out_impl<NormalKernel, Unused>(out, mean, std, std::move(gen));
}

at::Tensor& exponentialInplace(at::Tensor& self, double lambda, std::optional<at::Generator> gen) {
  return at::native::templates::exponential_impl_<ExponentialKernel, Unused>(self, lambda, std::move(gen));
}

at::Tensor& randomFromTo(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  return at::native::templates::random_from_to_impl<RandomFromToKernel, Unused>(self, from, to, std::move(gen));
}
at::Tensor& randomTo(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return randomFromTo(self, 0, to, std::move(gen));
}
// random_() with no range: [0, 2^digits] for floating types, [0, max] for integers,
// as CPU.
at::Tensor& randomFull(at::Tensor& self, std::optional<at::Generator> gen) {
  int64_t to_inc = 0;
  const auto t = self.scalar_type();
  if (t == at::kBool) {
    to_inc = 1;
  } else if (at::isFloatingType(t)) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "metalx_random_", [&] {
      to_inc = int64_t{1} << std::numeric_limits<scalar_t>::digits;
    });
  } else if (at::isIntegralType(t, false)) {
    AT_DISPATCH_V2(t, "metalx_random_", AT_WRAP([&] {
      to_inc = static_cast<int64_t>(std::min<uint64_t>(std::numeric_limits<scalar_t>::max(),
                                                      std::numeric_limits<int64_t>::max()));
    }), AT_EXPAND(AT_INTEGRAL_TYPES_V2));
  } else {
    TORCH_CHECK(false, "random_ is not implemented for ", t);
  }
  if (self.numel() == 0) return self;
  fillRange(self, static_cast<uint64_t>(to_inc) + 1, 0, gen);
  return self;
}

at::Tensor& bernoulliFloat(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  return at::native::templates::bernoulli_impl_<BernoulliScalarKernel, Unused>(self, p, std::move(gen));
}
at::Tensor& bernoulliTensor(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  return at::native::templates::bernoulli_impl_<BernoulliTensorKernel, Unused>(self, p, std::move(gen));
}
at::Tensor& bernoulliOut(const at::Tensor& self, std::optional<at::Generator> gen, at::Tensor& out) {
  return at::native::templates::bernoulli_out_impl<BernoulliTensorKernel, Unused>(out, self, std::move(gen));
}

// native_dropout: (input * mask / (1 - p), mask), as CPU/CUDA's: with train false (or p
// 0) the input is copied and the mask all true.
std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (input.numel() == 0) return {input, at::empty_like(input)};  // as CPU
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  auto dtype = kernelTypeOf(input, dropoutKernels);
  if (!dtype) {
    // float64: the mask from the device's bernoulli, the product in the input's type.
    at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
    bernoulliFloat(mask, 1 - p, std::nullopt);
    const double scale = p == 1 ? 0.0 : 1.0 / (1.0 - p);
    return {input * mask * scale, mask};
  }
  at::Tensor x = input.contiguous();
  at::Tensor out = at::empty_like(x);
  at::Tensor mask = at::empty_like(x, x.options().dtype(at::kBool));
  RandomParams params;
  params.a = static_cast<float>(p);
  params.b = p == 1 ? 0.0f : static_cast<float>(1.0 / (1.0 - p));
  reserveWords(params, std::nullopt, out, static_cast<uint64_t>(out.numel()));
  launchRandom(dropoutKernels, *dtype, out, params, {x, mask});
  return {out, mask};
}

at::Tensor nativeDropoutBackward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  return grad * (mask.to(grad.scalar_type()) * scale);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", TORCH_FN(uniformInplace));
  m.impl("normal_", TORCH_FN(normalInplace));
  m.impl("normal.Tensor_float", TORCH_FN(normalTensorFloat));
  m.impl("normal.float_Tensor", TORCH_FN(normalFloatTensor));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normalTensorTensor));
  m.impl("normal.Tensor_float_out", TORCH_FN(normalTensorFloatOut));
  m.impl("normal.float_Tensor_out", TORCH_FN(normalFloatTensorOut));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normalTensorTensorOut));
  m.impl("exponential_", TORCH_FN(exponentialInplace));
  m.impl("random_.from", TORCH_FN(randomFromTo));
  m.impl("random_.to", TORCH_FN(randomTo));
  m.impl("random_", TORCH_FN(randomFull));
  m.impl("bernoulli_.float", TORCH_FN(bernoulliFloat));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulliTensor));
  m.impl("bernoulli.out", TORCH_FN(bernoulliOut));
  m.impl("native_dropout", TORCH_FN(nativeDropout));
  m.impl("native_dropout_backward", TORCH_FN(nativeDropoutBackward));
}

}  // namespace
}  // namespace metalx
