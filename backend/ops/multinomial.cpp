// multinomial on metalx (functional and out=), drawing from the metalx generator.
//   with replacement: a sample inverts its row's running sums (kernels/multinomial.metal);
//   without: the Gumbel-top-k trick torch's CPU and CUDA use, argmax or topk of p / q with
//   q ~ Exp(1) (exponential_, div and topk all run on the device).
// Checks and messages are CPU's; checking the probabilities costs one synchronisation, as
// CPU's kernel reads them too. float64 probabilities run on the CPU fallback.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>

#include "allocator.h"
#include "core/stream_pool.h"
#include "generator.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/structured.h"

namespace metalx {
namespace {

using at::Tensor;

// Mirrors kernels/multinomial.metal's MultinomialParams.
struct MultinomialParams {
  uint64_t count = 0, group0 = 0;
  uint32_t seed_lo = 0, seed_hi = 0, n = 0, samples = 0;
};
static_assert(sizeof(MultinomialParams) == 32, "MultinomialParams must match the kernel");

launch::KernelFamily draw_kernels("multinomial_draw", {kernels::DType::Float32});

constexpr int64_t kMaxCategories = int64_t(1) << 24;  // CPU's limit (positions held as float)

const c10::OperatorHandle& outOperator() {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::multinomial", "out");
  return op;
}

// The checks CPU's with-replacement kernel makes, on every row at once.
void checkDistribution(const Tensor& probs) {
  const Tensor row_sums = probs.sum(-1);
  const Tensor flags = at::stack({probs.min() < 0, probs.isfinite().logical_not().any(), (row_sums <= 0).any()}).cpu();
  const bool* f = flags.const_data_ptr<bool>();
  TORCH_CHECK(!f[0], "invalid multinomial distribution (encountering probability entry < 0)");
  TORCH_CHECK(!f[1], "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
  TORCH_CHECK(!f[2], "invalid multinomial distribution (sum of probabilities <= 0)");
}

void drawWithReplacement(const Tensor& probs2d, int64_t samples, std::optional<at::Generator> gen,
                         const Tensor& out2d) {
  const Tensor cdf = at::cumsum(probs2d.to(at::kFloat), -1).contiguous();
  const Tensor dense = out2d.is_contiguous() ? out2d : at::empty(out2d.sizes(), out2d.options());
  MultinomialParams p;
  p.count = static_cast<uint64_t>(dense.numel());
  p.n = static_cast<uint32_t>(probs2d.size(1));
  p.samples = static_cast<uint32_t>(samples);
  auto* g = at::get_generator_or_default<MetalxGeneratorImpl>(gen, defaultGenerator(probs2d.device().index()));
  MetalxGeneratorImpl::PhiloxInputs in;
  {
    std::lock_guard<std::mutex> lock(g->mutex_);
    in = g->reserve(p.count);
  }
  p.seed_lo = static_cast<uint32_t>(in.seed);
  p.seed_hi = static_cast<uint32_t>(in.seed >> 32);
  p.group0 = in.offset / 4;
  launch::encodeThreads(draw_kernels, launch::Variant::Plain, kernels::DType::Float32, {&cdf, &dense}, p,
                        std::min<uint64_t>((p.count + 3) / 4, launch::kGridStrideThreads));
  if (!dense.is_same(out2d)) const_cast<Tensor&>(out2d).copy_(dense);
}

Tensor& multinomialOut(const Tensor& self, int64_t n_sample, bool replacement, std::optional<at::Generator> gen,
                       Tensor& result) {
  TORCH_CHECK(result.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(result.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ", result.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t n_categories = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= n_categories,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(n_categories <= kMaxCategories, "number of categories cannot exceed 2^24");
  if (self.scalar_type() == at::kDouble) {
    launch::cpuFallbackOut(outOperator(), {result}, self, n_sample, replacement, gen);
    return result;
  }
  if (self.dim() == 1) result.resize_({n_sample});
  else result.resize_({self.size(0), n_sample});
  if (result.numel() == 0) return result;

  if (!replacement) {
    // CPU's checks and messages for this path.
    const bool valid = ((self.max() < INFINITY) & (self.min() >= 0)).item<bool>();
    TORCH_CHECK(valid, "probability tensor contains either `inf`, `nan` or element < 0");
    const bool zero_row = self.dim() == 1 ? (self.sum() == 0).item<bool>() : (self.sum(1) == 0).any().item<bool>();
    TORCH_CHECK(!zero_row, "invalid multinomial distribution (sum of probabilities <= 0)");
    Tensor q = at::empty_like(self).exponential_(1, gen);
    at::div_out(q, self, q);
    if (n_sample == 1) {
      at::argmax_out(result, q, -1, /*keepdim=*/true);
    } else {
      Tensor values = at::empty(result.sizes(), self.options());
      at::topk_out(values, result, q, n_sample);
    }
    return result;
  }
  const Tensor probs2d = self.dim() == 1 ? self.unsqueeze(0) : self;
  checkDistribution(probs2d);
  drawWithReplacement(probs2d, n_sample, gen, self.dim() == 1 ? result.unsqueeze(0) : result);
  return result;
}

Tensor multinomial(const Tensor& self, int64_t n_sample, bool replacement, std::optional<at::Generator> gen) {
  Tensor result = at::empty({0}, self.options().dtype(at::kLong));
  multinomialOut(self, n_sample, replacement, gen, result);
  return result;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multinomial", TORCH_FN(multinomial));
  m.impl("multinomial.out", TORCH_FN(multinomialOut));
}

}  // namespace
}  // namespace metalx
