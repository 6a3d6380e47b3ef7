// The device index error records (see device_index_errors.h).
#include "device_index_errors.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/stream_pool.h"
#include "device.h"
#include "metalx/runtime/env.h"
#include "shared_storage.h"

namespace metalx {
namespace {

constexpr int kMaxDevices = 64;
constexpr int64_t kRecordWords = sizeof(IndexErrorRecord) / sizeof(int32_t);
static_assert(sizeof(IndexErrorRecord) == 40, "IndexErrorRecord must match kernels/index_check.metal");

// A stream's record. Never freed: kernels may still write them at exit.
struct StreamRecord {
  int64_t stream;
  at::Tensor* tensor;
};
std::mutex records_mutex;
std::array<std::vector<StreamRecord>, kMaxDevices> records;  // guarded by records_mutex

at::Tensor* findRecord(c10::DeviceIndex device, int64_t stream) {
  std::lock_guard<std::mutex> lock(records_mutex);
  for (const StreamRecord& r : records[device])
    if (r.stream == stream) return r.tensor;
  return nullptr;
}

std::mutex ops_mutex;
std::vector<const char*>& opNames() {
  static auto* names = new std::vector<const char*>();
  return *names;
}

const char* opName(uint32_t id) {
  std::lock_guard<std::mutex> lock(ops_mutex);
  return id >= 1 && id <= opNames().size() ? opNames()[id - 1] : "an indexing op";
}

}  // namespace

std::string indexErrorMessage(IndexMessage kind, int64_t value, int64_t size, int64_t dim) {
  switch (kind) {
    case IndexMessage::Bounds:
    case IndexMessage::BoundsIndexError:
      return c10::str("index ", value, " is out of bounds for dimension ", dim, " with size ", size);
    case IndexMessage::IndexCopy:
      return c10::str("index_copy_(): index ", value, " is out of bounds for dimension ", dim, " with size ", size);
    case IndexMessage::OutOfRangeInSelf: return "index out of range in self";
    case IndexMessage::FlatOutOfRange:
      return c10::str("out of range: tried to access index ", value, " on a tensor of ", size, " elements.");
    case IndexMessage::Target: return c10::str("Target ", value, " is out of bounds.");
    case IndexMessage::EmbeddingBagIndex:
      return c10::str("embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be ", value);
    case IndexMessage::OffsetsStart:
      return c10::str("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
                      "However, got ", value);
    case IndexMessage::OffsetsEnd:
      return c10::str("offsets[-1] can not be greater than input's length ", size, " but got offsets[-1] of ", value);
  }
  return c10::str("index ", value, " is out of range");
}

bool isIndexError(IndexMessage kind) {
  switch (kind) {
    case IndexMessage::Bounds:
    case IndexMessage::EmbeddingBagIndex:
    case IndexMessage::OffsetsStart:
    case IndexMessage::OffsetsEnd: return false;
    default: return true;
  }
}

const at::Tensor& indexErrorRecord(c10::DeviceIndex device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "metalx: device index ", device, " out of range");
  const int64_t stream = currentStream(device).id();
  if (at::Tensor* r = findRecord(device, stream)) return *r;
  // Host memory seen by the device (shared_storage.h's wrapping, as for tensors shared
  // between processes): the host fills it before any kernel can use it, so it needs no
  // wait, and it is not device memory the caching allocator counts as allocated.
  at::Tensor host = at::zeros({kRecordWords}, at::kInt);
  host.data_ptr<int32_t>()[0] = -1;  // pending = ~0u: nothing pending
  auto* r = new at::Tensor(at::empty({0}, at::TensorOptions(at::kInt).device(c10::DeviceType::PrivateUse1, device)));
  r->set_(wrapSharedMemory(host.storage(), device), 0, {kRecordWords}, {1});
  std::lock_guard<std::mutex> lock(records_mutex);
  for (const StreamRecord& existing : records[device])
    if (existing.stream == stream) return *existing.tensor;  // another thread made it meanwhile
  records[device].push_back({stream, r});
  return *r;
}

uint32_t indexCheckOpId(const char* op) {
  std::lock_guard<std::mutex> lock(ops_mutex);
  std::vector<const char*>& names = opNames();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == op || std::strcmp(names[i], op) == 0) return static_cast<uint32_t>(i + 1);
  names.push_back(op);
  return static_cast<uint32_t>(names.size());
}

bool syncIndexChecks() {
  // Read once (a bad value raises, naming the variable, at each use until fixed).
  static const bool on = withTorchErrors([] { return rt::env::flag("METALX_SYNC_INDEX_CHECKS", false); });
  return on;
}

void raiseDeviceIndexError(c10::DeviceIndex device) {
  if (device < 0 || device >= kMaxDevices) return;
  IndexErrorRecord* record = nullptr;
  uint32_t op = 0;
  {
    std::lock_guard<std::mutex> lock(records_mutex);
    for (const StreamRecord& r : records[device]) {
      auto* candidate = static_cast<IndexErrorRecord*>(r.tensor->data_ptr());
      // The op id is written last: non-zero means the record is complete.
      op = __atomic_load_n(&candidate->op, __ATOMIC_ACQUIRE);
      if (op != 0) {
        record = candidate;
        break;
      }
    }
  }
  if (!record) return;
  const auto kind = static_cast<IndexMessage>(record->message);
  const std::string cpu = indexErrorMessage(kind, record->value, record->size, record->dim);
  __atomic_store_n(&record->op, 0u, __ATOMIC_RELEASE);  // reported once; the process goes on
  const std::string message =
      syncIndexChecks() ? cpu
                        : c10::str("metalx: device-side index check failed in ", opName(op), ": ", cpu,
                                   " (raised at the next synchronisation; set METALX_SYNC_INDEX_CHECKS=1 to raise "
                                   "at the op)");
  TORCH_CHECK_INDEX(!isIndexError(kind), message);
  TORCH_CHECK(false, message);
}

}  // namespace metalx
