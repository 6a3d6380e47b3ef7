// How tensors of dtypes Gloo lacks travel through it.
//
// torch's Gloo backend moves and reduces float32/64, float16, bfloat16, int8, uint8,
// int32, int64 and bool; for int16, uint16, uint32, uint64 (and the float8 types) it
// raises "Invalid scalar type". metalx collectives carry those through a dtype Gloo has:
//
// - Moving values (broadcast, all_gather, gather, scatter, all_to_all, send/recv): Gloo
//   only copies bytes, so the tensor is reinterpreted as a Gloo dtype of the same size
//   (same shape and strides; no copy).
// - Reducing (all_reduce, reduce, reduce_scatter) integers: int16, uint16 and uint32
//   values are widened to int64, reduced there, and narrowed back; the narrowing keeps
//   the low bits, so a sum or product is the wrapped (modular) result torch's own
//   integer arithmetic gives (int16 32767 + 1 -> -32768), MIN/MAX are exact, and
//   BAND/BOR/BXOR act on the same bits. uint64 has no wider type: its two's-complement
//   bits are reduced as int64 (SUM, PRODUCT and the bitwise ops give the same bits as
//   unsigned arithmetic modulo 2^64), and for MIN/MAX the sign bit is flipped first so
//   that signed order is unsigned order.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <functional>

namespace metalx::distributed {

// Whether Gloo takes tensors of this dtype as they are.
bool glooHasDtype(c10::ScalarType dtype);

// `host` (a CPU tensor of a dtype Gloo lacks) as a Gloo dtype of the same element size,
// over the same memory. Raises for a dtype with no such carrier.
at::Tensor asGlooBytes(const at::Tensor& host);

// A CPU tensor Gloo can reduce with `op`, holding `host`'s values (a dtype Gloo lacks),
// and how to write a reduced result of it back into `host`.
struct GlooReducible {
  at::Tensor tensor;
  // Writes the reduced `tensor` back into the original's memory, in its dtype.
  std::function<void()> write_back;
};
GlooReducible asGlooReducible(const at::Tensor& host, const c10d::ReduceOp& op);

}  // namespace metalx::distributed
