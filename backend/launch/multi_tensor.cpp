// The multi-tensor launcher (see multi_tensor.h).
#include "launch/multi_tensor.h"

#include <algorithm>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/elementwise.h"

namespace metalx::launch {
namespace {

constexpr uint32_t kSlotsIndex = 0, kArgsIndex = 28, kTableIndex = 29;
static_assert(kMultiTensorSlots == kArgsIndex, "slots come before the arguments");

// Elements per thread: a few on a GPU; long runs on the simulator's CPU threads, whose
// per-thread setup (the group loop's call, the op's constants, the bounds) costs as
// much as a 64-element loop (an AdamW foreach step over 10M floats: 48 -> 37 ms with
// 256).
uint32_t elementsPerThread(Stream& stream) { return stream.device().info().is_simulated ? 256 : 4; }
constexpr uint32_t kMaxThreadsPerGroup = 256;

uint64_t pack(uint32_t slot, size_t offset) {
  TORCH_INTERNAL_ASSERT(offset < (uint64_t(1) << 56), "metalx: buffer offset too large for a multi-tensor table");
  return (uint64_t(slot) << 56) | uint64_t(offset);
}

// One dispatch being filled.
class Dispatch {
 public:
  explicit Dispatch(const std::vector<at::Tensor>& extras) : extras_(extras) { reset(); }

  bool empty() const { return entries_.empty(); }

  // Adds tensor `i` of `call` if its buffers fit; false when this dispatch is full.
  bool tryAdd(const MultiTensorCall& call, size_t i, double scalar) {
    if (entries_.size() == size_t(kMultiTensorMaxEntries)) return false;
    const size_t nlists = call.lists.size();
    std::pair<rt::BufferPtr, size_t> where[kMultiTensorMaxLists];
    int fresh = 0;
    const rt::Buffer* seen[kMultiTensorMaxLists];
    for (size_t k = 0; k < nlists; ++k) {
      where[k] = bufferFor(call.lists[k][i]);
      const rt::Buffer* b = where[k].first.get();
      if (slotOf(b) < 0 && std::find(seen, seen + fresh, b) == seen + fresh) seen[fresh++] = b;
    }
    if (slots_.size() + fresh > size_t(kMultiTensorSlots)) return false;
    MultiTensorEntry entry;
    for (size_t k = 0; k < nlists; ++k) entry.loc[k] = pack(slotFor(where[k].first), where[k].second);
    entry.numel = static_cast<uint64_t>(call.lists[0][i].numel());
    entry.scalar = static_cast<float>(scalar);
    entries_.push_back(entry);
    return true;
  }

  void encode(KernelFamily& kernels, DType dtype, Stream& stream, MultiTensorArgs args, uint32_t factor) {
    const uint32_t per_thread = elementsPerThread(stream) * factor;
    const rt::ComputePipelinePtr& pipeline = kernels.pipeline(stream, Variant::Plain, dtype);
    uint64_t longest = 0;
    for (const auto& e : entries_) longest = std::max(longest, e.numel);
    // Threads per group: enough for the longest tensor's chunk, a multiple of 32, no
    // more than the pipeline allows (a GPU may allow fewer for a kernel with many registers).
    const uint64_t wanted = (longest + per_thread - 1) / per_thread;
    const uint64_t allowed = std::max<uint64_t>(32, pipeline->maxTotalThreadsPerThreadgroup() / 32 * 32);
    const uint32_t threads =
        static_cast<uint32_t>(std::min<uint64_t>({kMaxThreadsPerGroup, allowed, (wanted + 31) / 32 * 32}));
    const uint64_t chunk = uint64_t(threads) * per_thread;
    uint64_t chunks = 0;
    for (auto& e : entries_) {
      e.first_chunk = static_cast<uint32_t>(chunks);
      chunks += (e.numel + chunk - 1) / chunk;
    }
    TORCH_CHECK(chunks < (uint64_t(1) << 32), "metalx: too many elements for one multi-tensor dispatch");
    args.per_thread = per_thread;
    args.chunk = static_cast<uint32_t>(chunk);
    args.ntensors = static_cast<uint32_t>(entries_.size());
    for (size_t x = 0; x < extras_.size(); ++x) args.extra[x] = extra_locs_[x];
    stream.encodeCompute([&](rt::ComputeEncoder& enc) {
      enc.setComputePipeline(pipeline);
      // Every declared slot must be bound: unused ones repeat slot 0.
      for (uint32_t s = 0; s < uint32_t(kMultiTensorSlots); ++s)
        enc.setBuffer(s < slots_.size() ? slots_[s] : slots_[0], 0, kSlotsIndex + s);
      enc.setBytes(&args, sizeof args, kArgsIndex);
      enc.setBytes(entries_.data(), entries_.size() * sizeof(MultiTensorEntry), kTableIndex);
      enc.dispatchThreadgroups({chunks, 1, 1}, {threads, 1, 1});
    });
    reset();
  }

 private:
  int slotOf(const rt::Buffer* b) const {
    for (size_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].get() == b) return static_cast<int>(s);
    return -1;
  }
  uint32_t slotFor(const rt::BufferPtr& b) {
    const int s = slotOf(b.get());
    if (s >= 0) return static_cast<uint32_t>(s);
    slots_.push_back(b);
    return static_cast<uint32_t>(slots_.size() - 1);
  }
  // A new dispatch binds the device scalars first.
  void reset() {
    slots_.clear();
    entries_.clear();
    extra_locs_.clear();
    for (const at::Tensor& t : extras_) {
      if (!t.defined()) {
        extra_locs_.push_back(0);
        continue;
      }
      auto [buffer, offset] = bufferFor(t);
      extra_locs_.push_back(pack(slotFor(buffer), offset));
    }
  }

  const std::vector<at::Tensor>& extras_;
  std::vector<rt::BufferPtr> slots_;
  std::vector<MultiTensorEntry> entries_;
  std::vector<uint64_t> extra_locs_;
};

}  // namespace

uint32_t multiTensorElementsPerThread(int device_index) { return elementsPerThread(currentStream(device_index)); }

void runMultiTensor(KernelFamily& kernels, c10::ScalarType dtype, MultiTensorCall& call) {
  TORCH_INTERNAL_ASSERT(!call.lists.empty() && call.lists.size() <= size_t(kMultiTensorMaxLists),
                        "metalx: a multi-tensor kernel takes 1 to ", kMultiTensorMaxLists, " lists");
  TORCH_INTERNAL_ASSERT(call.extras.size() <= size_t(kMultiTensorExtras), "metalx: at most ", kMultiTensorExtras,
                        " device scalars per multi-tensor kernel");
  const size_t n = call.lists[0].size();
  for (const at::TensorList& list : call.lists)
    TORCH_INTERNAL_ASSERT(list.size() == n, "metalx: multi-tensor lists of different lengths");
  TORCH_INTERNAL_ASSERT(call.scalars.size() <= 1 || call.scalars.size() == n,
                        "metalx: one scalar per tensor, or one for all");
  const std::optional<DType> kernel_dtype = kernelDtype(dtype);
  TORCH_INTERNAL_ASSERT(kernel_dtype && kernels.supports(*kernel_dtype), "metalx: no ", kernels.op(),
                        " kernel for ", dtype);

  // The first tensor with elements names the device.
  size_t first = 0;
  while (first < n && call.lists[0][first].numel() == 0) ++first;
  if (first == n) return;
  Stream& stream = currentStream(call.lists[0][first].device().index());
  TORCH_INTERNAL_ASSERT(call.per_thread_factor >= 1 && call.per_thread_factor <= 64, "metalx: bad per_thread_factor");

  Dispatch dispatch(call.extras);
  for (size_t i = first; i < n; ++i) {
    if (call.lists[0][i].numel() == 0) continue;
    const double scalar = call.scalars.empty() ? 0.0 : call.scalars[call.scalars.size() == 1 ? 0 : i];
    if (dispatch.tryAdd(call, i, scalar)) continue;
    dispatch.encode(kernels, *kernel_dtype, stream, call.args, call.per_thread_factor);
    TORCH_INTERNAL_ASSERT(dispatch.tryAdd(call, i, scalar), "metalx: one tensor's operands need more than ",
                          kMultiTensorSlots, " buffers");
  }
  if (!dispatch.empty()) dispatch.encode(kernels, *kernel_dtype, stream, call.args, call.per_thread_factor);
}

}  // namespace metalx::launch
