// Built into the example extension by test_cpp_extension.py (not part of the example):
// ways an extension can misuse metalx/extension.h, each of which must raise a clear
// error and leave the stream usable. metalx_ext_misuse::misuse(x, what) runs one.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <metalx/extension.h>

#include <string>
#include <vector>

namespace {

// Two buffer arguments, so that binding only one is a mistake the API must catch.
constexpr const char* kSource = R"(
#include <metal_stdlib>
using namespace metal;
kernel void twice(device float* out [[buffer(0)]], const device float* in [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) { out[i] = 2.0f * in[i]; }
)";

void misuse(const at::Tensor& x, const std::string& what) {
  const c10::DeviceIndex device = x.device().index();
  const metalx::ext::BufferSlice slice = metalx::ext::bufferOf(x);
  auto library = metalx::ext::compileLibrary(device, kSource, "misuse.metal");
  auto pipeline = metalx::ext::pipeline(device, library, "twice");
  if (what == "unbound_argument") {
    metalx::ext::encodeCompute(device, [&](metalx::rt::ComputeEncoder& e) {
      e.setComputePipeline(pipeline);
      e.setBuffer(slice.buffer, slice.offset, 0);  // [[buffer(1)]] forgotten
      e.dispatchThreads({1, 1, 1}, {1, 1, 1});
    });
  } else if (what == "no_pipeline") {
    metalx::ext::encodeCompute(device, [&](metalx::rt::ComputeEncoder& e) {
      e.setBuffer(slice.buffer, slice.offset, 0);
      e.setBuffer(slice.buffer, slice.offset, 1);
      e.dispatchThreads({1, 1, 1}, {1, 1, 1});
    });
  } else if (what == "end_encoding") {
    metalx::ext::encodeCompute(device, [&](metalx::rt::ComputeEncoder& e) { e.endEncoding(); });
  } else if (what == "metalx_op_inside") {  // would re-bind the encoder in use
    metalx::ext::encodeCompute(device, [&](metalx::rt::ComputeEncoder& e) {
      e.setComputePipeline(pipeline);
      x.fill_(1.0);
    });
  } else if (what == "too_many_bytes") {  // a runtime validation error, not the guard's
    std::vector<char> bytes(8192);
    metalx::ext::encodeCompute(device, [&](metalx::rt::ComputeEncoder& e) {
      e.setBytes(bytes.data(), bytes.size(), 1);
    });
  } else if (what == "compile_error") {
    metalx::ext::compileLibrary(device, "kernel void broken(\n  device float* out [[buffer(0)]]) { out[0] = undeclared; }\n",
                                "broken.metal");
  } else if (what == "unknown_kernel") {
    metalx::ext::pipeline(device, library, "thrice");
  } else {
    TORCH_CHECK(false, "misuse: unknown case '", what, "'");
  }
}

}  // namespace

TORCH_LIBRARY(metalx_ext_misuse, m) { m.def("misuse(Tensor x, str what) -> ()"); }

TORCH_LIBRARY_IMPL(metalx_ext_misuse, PrivateUse1, m) { m.impl("misuse", &misuse); }
