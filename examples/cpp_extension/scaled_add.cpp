// A custom op with its own Metal kernel on metalx tensors, through metalx/extension.h:
// metalx_example::scaled_add(x, y, alpha) = x + alpha * y, for float32 and float16.
//
// The op is registered for the metalx device (PrivateUse1), so torch.ops and autograd-
// free code call it like any op; the kernel is encoded on the current metalx stream,
// so it is ordered with metalx's own work on that stream (and runs on a side stream
// inside torch.metalx.stream(s)).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <metalx/extension.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace {

// The kernel source is its own .metal file, read once from next to this file (found
// through __FILE__, the path the compiler was given), so that compile errors name its
// lines. A packaged extension would embed the text in the library instead.
const std::string& kernelSource() {
  static const std::string source = [] {
    std::string path = __FILE__;
    path = path.substr(0, path.find_last_of("/\\") + 1) + "scaled_add.metal";
    std::ifstream in(path);
    TORCH_CHECK(in, "scaled_add: cannot read its Metal source ", path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }();
  return source;
}

const char* kernelFor(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float: return "scaled_add_float";
    case c10::ScalarType::Half: return "scaled_add_half";
    default:
      TORCH_CHECK(false, "scaled_add: supports float32 and float16 tensors, got ", dtype);
  }
}

at::Tensor scaledAdd(const at::Tensor& x, const at::Tensor& y, double alpha) {
  TORCH_CHECK(x.device().type() == c10::DeviceType::PrivateUse1,
              "scaled_add: x must be a metalx tensor, got one on ", x.device());
  TORCH_CHECK(y.device() == x.device(), "scaled_add: y is on ", y.device(), " but x is on ", x.device(),
              "; both must be on the same metalx device");
  TORCH_CHECK(x.scalar_type() == y.scalar_type(), "scaled_add: x is ", x.scalar_type(), " but y is ",
              y.scalar_type(), "; both must have the same dtype");
  TORCH_CHECK(x.sizes() == y.sizes(), "scaled_add: x has shape ", x.sizes(), " but y has shape ", y.sizes(),
              "; they must be equal (no broadcasting)");
  const char* kernel = kernelFor(x.scalar_type());
  // One thread per element, indexed by a 32-bit thread_position_in_grid.
  TORCH_CHECK(x.numel() <= UINT32_MAX, "scaled_add: at most 2**32 - 1 elements, got ", x.numel());

  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) return out;  // no memory to bind, nothing to run
  // The kernel reads x and y as dense arrays: views (transposed, strided) are gathered
  // first, by metalx, on the same stream. A contiguous slice keeps its storage offset,
  // which bufferOf() includes.
  const at::Tensor xc = x.contiguous(), yc = y.contiguous();

  const c10::DeviceIndex device = x.device().index();
  // Cache hits after the first call: metalx keeps compiled libraries and pipelines.
  const auto library = metalx::ext::compileLibrary(device, kernelSource(), "scaled_add.metal");
  const auto pipeline = metalx::ext::pipeline(device, library, kernel);

  const metalx::ext::BufferSlice o = metalx::ext::bufferOf(out), a = metalx::ext::bufferOf(xc),
                                 b = metalx::ext::bufferOf(yc);
  const float alpha32 = static_cast<float>(alpha);
  const uint64_t n = static_cast<uint64_t>(out.numel());
  const uint64_t group = std::min<uint64_t>({pipeline->maxTotalThreadsPerThreadgroup(), 256, n});
  metalx::ext::encodeCompute(device, [&](metalx::rt::ComputeEncoder& e) {
    e.setComputePipeline(pipeline);
    e.setBuffer(o.buffer, o.offset, 0);
    e.setBuffer(a.buffer, a.offset, 1);
    e.setBuffer(b.buffer, b.offset, 2);
    e.setBytes(&alpha32, sizeof alpha32, 3);
    e.dispatchThreads({n, 1, 1}, {group, 1, 1});
  });
  // xc and yc may be temporaries freed on return while the kernel is still queued:
  // metalx's allocator reuses their memory only after the stream has run past it.
  return out;
}

}  // namespace

TORCH_LIBRARY(metalx_example, m) {
  m.def("scaled_add(Tensor x, Tensor y, float alpha) -> Tensor");
}

TORCH_LIBRARY_IMPL(metalx_example, PrivateUse1, m) {
  m.impl("scaled_add", &scaledAdd);
}

// Two inspection helpers (what the tests check the API against), as Python functions.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("buffer_offset", [](const at::Tensor& t) { return metalx::ext::bufferOf(t).offset; },
        "Byte offset of the tensor's first element in its metalx buffer.");
  m.def("current_stream_id", [](int device) { return metalx::ext::currentStreamId(static_cast<c10::DeviceIndex>(device)); },
        "Id of the device's current metalx stream, as the extension sees it.");
}
