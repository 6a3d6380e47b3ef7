// Pipeline lookup (see kernel_table.h).
#include "launch/kernel_table.h"

#include <c10/util/Exception.h>

namespace metalx::launch {

const char* variantName(Variant v) {
  switch (v) {
    case Variant::Dense: return "dense";
    case Variant::DenseScalarA: return "dense_sv";
    case Variant::DenseScalarB: return "dense_vs";
    case Variant::Strided: return "strided";
    case Variant::Strided64: return "strided64";
    case Variant::Plain: return "";
    case Variant::Rows: return "rows";
    case Variant::Columns: return "cols";
    case Variant::Partials: return "partials";
    case Variant::DenseOpmathB: return "dense_vm";
    case Variant::StridedOpmathB: return "strided_vm";
    case Variant::Strided64OpmathB: return "strided64_vm";
  }
  return "?";
}

KernelFamily::~KernelFamily() {
  for (auto& t : tables_) delete t.load(std::memory_order_acquire);
}

std::string KernelFamily::kernelName(Variant variant, DType dtype) const {
  std::string name = op_;
  if (variant != Variant::Plain) name += std::string("_") + variantName(variant);
  return name + "_" + kernels::kernelTypeName(dtype);
}

KernelFamily::Table& KernelFamily::table(int device_index) {
  TORCH_CHECK(device_index >= 0 && device_index < kMaxDevices, "metalx supports at most ", kMaxDevices,
              " devices, got device index ", device_index);
  Table* t = tables_[device_index].load(std::memory_order_acquire);
  if (t) return *t;
  std::lock_guard<std::mutex> lock(tables_mutex_);
  t = tables_[device_index].load(std::memory_order_relaxed);
  if (!t) {
    t = new Table();
    tables_[device_index].store(t, std::memory_order_release);
  }
  return *t;
}

const rt::ComputePipelinePtr& KernelFamily::pipeline(Stream& stream, Variant variant, DType dtype) {
  TORCH_INTERNAL_ASSERT(supports(dtype), "metalx: no ", op_, " kernel for ", kernels::dtypeName(dtype));
  Table& t = table(stream.deviceIndex());
  Slot& slot = t.slots[static_cast<int>(variant) * kernels::kNumDTypes + static_cast<int>(dtype)];
  if (slot.ready.load(std::memory_order_acquire)) return slot.pipeline;
  std::lock_guard<std::mutex> lock(t.mutex);
  if (!slot.ready.load(std::memory_order_relaxed)) {
    slot.pipeline = stream.pipelines().builtin(kernelName(variant, dtype));
    slot.ready.store(true, std::memory_order_release);
  }
  return slot.pipeline;
}

}  // namespace metalx::launch
