// The launch of the device-side index checks (see index_check.h).
#include "ops/index_check.h"

#include <ATen/ATen.h>

#include "device.h"
#include "launch/threads.h"

namespace metalx {
namespace {

// Mirrors kernels/index_check.metal's IndexCheckParams.
struct IndexCheckParams {
  int64_t low = 0;
  int64_t high = 0;
  int64_t size = 0;
  int64_t dim = 0;
  int64_t ignore = 0;
  uint64_t numel = 0;
  uint32_t has_ignore = 0;
  uint32_t op = 0;
  uint32_t message = 0;
  uint32_t unused = 0;
};
static_assert(sizeof(IndexCheckParams) == 64, "IndexCheckParams must match kernels/index_check.metal");

launch::KernelFamily findKernels("index_check_find", launch::DTypeSet{kernels::DType::Int64, kernels::DType::Int32});
launch::KernelFamily recordKernels("index_check_record",
                                   launch::DTypeSet{kernels::DType::Int64, kernels::DType::Int32});

// The check on the host, for an index that lives there: raises CPU's error at once.
void checkOnHost(const at::Tensor& index, const IndexCheck& check) {
  const at::Tensor values = index.to(at::kLong).reshape({-1});
  at::Tensor bad = values.lt(check.low).logical_or_(values.ge(check.high));
  if (check.ignore) bad.logical_and_(values.ne(*check.ignore));
  if (!bad.any().item<bool>()) return;
  const int64_t value = values.masked_select(bad)[0].item<int64_t>();
  const std::string message = indexErrorMessage(check.message, value, check.size, check.dim);
  TORCH_CHECK_INDEX(!isIndexError(check.message), message);
  TORCH_CHECK(false, message);
}

}  // namespace

IndexCheck boundsCheck(int64_t size, int64_t dim, IndexMessage message, bool negative_ok) {
  IndexCheck c;
  c.low = negative_ok ? -size : 0;
  c.high = size;
  c.size = size;
  c.dim = dim;
  c.message = message;
  return c;
}

void checkIndicesOnDevice(const at::Tensor& index, const IndexCheck& check, const char* op) {
  if (index.numel() == 0) return;
  if (index.device().is_cpu()) return checkOnHost(index, check);
  const bool int32 = index.scalar_type() == at::kInt;
  const at::Tensor values = (int32 || index.scalar_type() == at::kLong ? index : index.to(at::kLong)).contiguous();
  const c10::DeviceIndex device = values.device().index();
  const at::Tensor& record = indexErrorRecord(device);
  IndexCheckParams p;
  p.low = check.low;
  p.high = check.high;
  p.size = check.size;
  p.dim = check.dim;
  p.has_ignore = check.ignore ? 1 : 0;
  p.ignore = check.ignore.value_or(0);
  p.numel = static_cast<uint64_t>(values.numel());
  p.op = indexCheckOpId(op);
  p.message = static_cast<uint32_t>(check.message);
  const kernels::DType type = int32 ? kernels::DType::Int32 : kernels::DType::Int64;
  launch::encodeThreads(findKernels, launch::Variant::Plain, type, {&values, &record}, p,
                        std::min<uint64_t>(p.numel, 64 * 1024));
  launch::encodeThreads(recordKernels, launch::Variant::Plain, type, {&values, &record}, p, 1);
  if (syncIndexChecks()) synchronizeCurrentStream(device);  // raises CPU's error here
}

}  // namespace metalx
