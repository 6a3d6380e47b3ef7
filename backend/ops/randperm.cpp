// randperm on metalx: a random 64-bit key per position from the metalx generator
// (Philox, random_ in random.cpp), then a stable sort of the keys (sort_lines.cpp): the
// sorted positions are the permutation. Equal keys (about n^2 / 2^64 likely) keep their
// order, so the result is always a permutation, and it depends only on the generator's
// state: the same seed gives the same permutation on every run. Argument checks are
// torch's (CPU's messages).
#include <ATen/ATen.h>
#include <ATen/native/TensorFactories.h>
#include <torch/library.h>

#include <limits>

#include "sort_lines.h"

namespace metalx {
namespace {

at::Tensor& randpermOut(int64_t n, std::optional<at::Generator> generator, at::Tensor& result) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  TORCH_CHECK(!generator.has_value() || result.device() == generator->device(), "Expected a '", result.device(),
              "' generator device but found '", generator->device(), "'");
  TORCH_CHECK(n < int64_t(std::numeric_limits<uint32_t>::max()), "randperm on metalx: n must be below 2^32, got ", n);
  at::native::check_supported_max_int_with_precision(n, result);
  result.resize_({n});
  if (n == 0) return result;
  const at::Tensor keys = at::empty({n}, result.options().dtype(at::kLong));
  keys.random_(std::numeric_limits<int64_t>::min(), std::nullopt, generator);
  const bool direct = result.scalar_type() == at::kLong;
  const at::Tensor positions = direct ? result : at::empty({n}, keys.options());
  sortLines(keys, 0, /*descending=*/false, n, /*values=*/nullptr, positions);
  if (!direct) result.copy_(positions);
  return result;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("randperm.generator_out", TORCH_FN(randpermOut));
}

}  // namespace
}  // namespace metalx
