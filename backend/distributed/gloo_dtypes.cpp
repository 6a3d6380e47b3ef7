#include "distributed/gloo_dtypes.h"

#include <ATen/ATen.h>

#include <limits>

namespace metalx::distributed {

bool glooHasDtype(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat:
    case c10::kDouble:
    case c10::kHalf:
    case c10::kBFloat16:
    case c10::kChar:
    case c10::kByte:
    case c10::kInt:
    case c10::kLong:
    case c10::kBool:
      return true;
    default:
      return false;
  }
}

at::Tensor asGlooBytes(const at::Tensor& host) {
  // Each carrier only has its bytes copied by Gloo's data-movement collectives.
  switch (host.element_size()) {
    case 1:
      return host.view(c10::kByte);
    case 2:
      return host.view(c10::kHalf);
    case 4:
      return host.view(c10::kInt);
    case 8:
      return host.view(c10::kLong);
    default:
      TORCH_CHECK(false, "metalx collectives cannot move ", host.scalar_type(), " tensors through Gloo (",
                  host.element_size(), "-byte elements)");
  }
}

GlooReducible asGlooReducible(const at::Tensor& host, const c10d::ReduceOp& op) {
  const c10::ScalarType dtype = host.scalar_type();
  TORCH_CHECK(dtype == c10::kShort || dtype == c10::kUInt16 || dtype == c10::kUInt32 || dtype == c10::kUInt64,
              "metalx collectives cannot reduce ", dtype,
              " tensors through Gloo: it reduces float32, float64, float16, bfloat16, int8, uint8, int16, uint16, "
              "int32, uint32, int64, uint64 and bool");
  // As for the integer dtypes Gloo has (it divides the sum in place).
  TORCH_CHECK(op.op_ != c10d::ReduceOp::AVG, "ReduceOp.AVG of ", dtype,
              " tensors: the average of integers is not an integer (result type Float can't be cast to the desired "
              "output type ",
              dtype, ")");
  if (dtype != c10::kUInt64) {
    // int64 holds every value and every sum of fewer than 2^31 of them; narrowing back
    // keeps the low bits: the wrapped result.
    at::Tensor wide = host.to(c10::kLong, /*non_blocking=*/false, /*copy=*/true, c10::MemoryFormat::Contiguous);
    return {wide, [host, wide]() mutable { host.copy_(wide); }};
  }
  at::Tensor bits = host.view(c10::kLong);
  if (op.op_ != c10d::ReduceOp::MIN && op.op_ != c10d::ReduceOp::MAX) {
    return {bits, {}};  // modular arithmetic and bitwise ops: same bits signed or not
  }
  const int64_t sign = std::numeric_limits<int64_t>::min();
  at::Tensor ordered = bits.bitwise_xor(sign).contiguous();
  return {ordered, [bits, ordered, sign]() mutable { bits.copy_(ordered.bitwise_xor(sign)); }};
}

}  // namespace metalx::distributed
