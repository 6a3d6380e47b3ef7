// Memory for the CPU kernels the fallback runs: device memory, so that their results
// become metalx tensors without a copy.
//
// metalx wraps the process's CPU allocator once, at load. Outside the fallback it
// passes every call through untouched. While a thread runs a CPU kernel for the
// fallback (FallbackOutputScope), that thread's CPU allocations come from the metalx
// device (shared storage the CPU can address); a result tensor whose memory came from
// there is then adopted as a metalx tensor in place. Allocations made on other threads
// (a kernel's parallel workers) stay ordinary CPU memory.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace metalx {

void installFallbackCpuAllocator();

class FallbackOutputScope {
 public:
  explicit FallbackOutputScope(c10::DeviceIndex device);
  ~FallbackOutputScope();
  FallbackOutputScope(const FallbackOutputScope&) = delete;
  FallbackOutputScope& operator=(const FallbackOutputScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// A CPU tensor over the same memory as metalx tensor `t` (same storage bytes, offset,
// sizes, strides, neg/conj bits), for a CPU kernel to read or write in place. Its
// storage is resizable with the CPU allocator, so a kernel that must grow an out=
// argument can (the memory then moves to the CPU; the caller copies it back).
at::Tensor cpuAlias(const at::Tensor& t);

// `cpu` as a metalx tensor over the same memory, if that memory is device memory
// allocated for the fallback and `cpu` owns it alone; nullopt otherwise.
std::optional<at::Tensor> adoptAsDeviceTensor(const at::Tensor& cpu);

}  // namespace metalx
