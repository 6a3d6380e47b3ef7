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

std::string KernelFamily::kernelName(Variant variant, DType dtype) const {
  std::string name = op_;
  if (variant != Variant::Plain) name += std::string("_") + variantName(variant);
  return name + "_" + kernels::kernelTypeName(dtype);
}

const rt::ComputePipelinePtr& KernelFamily::pipeline(Stream& stream, Variant variant, DType dtype) {
  TORCH_INTERNAL_ASSERT(supports(dtype), "metalx: no ", op_, " kernel for ", kernels::dtypeName(dtype));
  return pipelines_.get(stream, static_cast<int>(variant) * kernels::kNumDTypes + static_cast<int>(dtype),
                        [&] { return kernelName(variant, dtype); });
}

}  // namespace metalx::launch
