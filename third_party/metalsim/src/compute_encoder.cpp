// A simulated MTLComputeCommandEncoder (see encoders.h).
#include <cstring>

#include "device.h"
#include "encoders.h"
#include "library.h"
#include "metalx/runtime/error.h"

namespace metalsim {

using metalx::rt::Error;
using metalx::rt::ErrorKind;
using metalx::rt::Size3;

namespace {

void requireIndex(uint32_t index, uint32_t limit, const char* operation) {
  if (index >= limit)
    throw Error(ErrorKind::Validation, std::string(operation) + ": index " + std::to_string(index) +
                                           " is out of range (Metal has slots 0-" +
                                           std::to_string(limit - 1) + ")");
}

std::string dims(Size3 s) {
  return "(" + std::to_string(s.width) + ", " + std::to_string(s.height) + ", " +
         std::to_string(s.depth) + ")";
}

}  // namespace

void SimComputeEncoder::endEncoding() {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  doEnd();
}

void SimComputeEncoder::setComputePipeline(const metalx::rt::ComputePipelinePtr& pipeline) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  requireOpen("setComputePipeline");
  auto sim = std::dynamic_pointer_cast<SimPipeline>(pipeline);
  if (!sim || &sim->device() != &cb_->device())
    throw Error(ErrorKind::Validation, "setComputePipeline: the pipeline belongs to another device than the " + where());
  pipeline_ = std::move(sim);
  for (auto& s : slots_) s.since_pipeline = false;
}

void SimComputeEncoder::setBuffer(const metalx::rt::BufferPtr& buffer, size_t offset, uint32_t index) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  const char* op = "setBuffer";
  requireOpen(op);
  requireIndex(index, metalx::rt::kMaxBufferBindings, op);
  checkBufferDevice(buffer, op);
  if (offset > buffer->length())
    throw Error(ErrorKind::Validation, "setBuffer: offset " + std::to_string(offset) +
                                           " is past the end of the buffer (" +
                                           std::to_string(buffer->length()) + " bytes) at index " +
                                           std::to_string(index));
  Slot& s = slots_[index];
  s.bound = true;
  s.since_pipeline = true;
  s.buffer = buffer;
  s.offset = offset;
  s.bytes.clear();
}

void SimComputeEncoder::setBytes(const void* bytes, size_t length, uint32_t index) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  const char* op = "setBytes";
  requireOpen(op);
  requireIndex(index, metalx::rt::kMaxBufferBindings, op);
  if (length == 0 || length > metalx::rt::kMaxInlineBytes)
    throw Error(ErrorKind::Validation, "setBytes: length " + std::to_string(length) +
                                           " must be between 1 and 4096 bytes; use a buffer for more");
  Slot& s = slots_[index];
  s.bound = true;
  s.since_pipeline = true;
  s.buffer.reset();
  s.offset = 0;
  s.bytes.assign(static_cast<const unsigned char*>(bytes), static_cast<const unsigned char*>(bytes) + length);
}

void SimComputeEncoder::setThreadgroupMemoryLength(size_t length, uint32_t index) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  const char* op = "setThreadgroupMemoryLength";
  requireOpen(op);
  requireIndex(index, metalx::rt::kMaxThreadgroupMemoryBindings, op);
  if (length % 16 != 0)
    throw Error(ErrorKind::Validation, "setThreadgroupMemoryLength: length " + std::to_string(length) +
                                           " must be a multiple of 16 bytes");
  const size_t limit = cb_->device().info().max_threadgroup_memory_length;
  if (length > limit)
    throw Error(ErrorKind::Validation, "setThreadgroupMemoryLength: " + std::to_string(length) +
                                           " bytes is more than the device's " + std::to_string(limit));
  tg_lengths_[index] = length;
}

void SimComputeEncoder::dispatchThreads(Size3 threads, Size3 per_group) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  requireOpen("dispatchThreads");
  auto groups = [](uint64_t n, uint64_t per) { return per ? (n + per - 1) / per : 0; };
  dispatch(threads, per_group,
           {groups(threads.width, per_group.width), groups(threads.height, per_group.height),
            groups(threads.depth, per_group.depth)});
}

void SimComputeEncoder::dispatchThreadgroups(Size3 groups, Size3 per_group) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  requireOpen("dispatchThreadgroups");
  dispatch({groups.width * per_group.width, groups.height * per_group.height,
            groups.depth * per_group.depth},
           per_group, groups);
}

void SimComputeEncoder::dispatch(Size3 threads, Size3 per_group, Size3 groups) {
  if (!pipeline_)
    throw Error(ErrorKind::Validation, "dispatch: no compute pipeline is set on the " + where());
  const kabi::KernelInfo& k = pipeline_->kernel();
  const std::string kname = std::string("kernel '") + k.name + "'";
  if (per_group.width == 0 || per_group.height == 0 || per_group.depth == 0)
    throw Error(ErrorKind::Validation, "dispatch of " + kname + ": threadgroup size " + dims(per_group) +
                                           " has a zero dimension");
  if (per_group.count() > pipeline_->maxTotalThreadsPerThreadgroup())
    throw Error(ErrorKind::Validation,
                "dispatch of " + kname + ": " + std::to_string(per_group.count()) +
                    " threads per threadgroup " + dims(per_group) + " is more than the pipeline's maximum of " +
                    std::to_string(pipeline_->maxTotalThreadsPerThreadgroup()));
  const uint64_t u32 = 0xffffffffull;
  if (threads.width > u32 || threads.height > u32 || threads.depth > u32)
    throw Error(ErrorKind::Validation, "dispatch of " + kname + ": grid " + dims(threads) +
                                           " has a dimension of 2^32 threads or more");
  if (threads.count() == 0) return;  // nothing to run

  // Every buffer and threadgroup argument the kernel declares must be bound, and
  // nothing may be bound for this pipeline at an index it does not declare (a binding
  // meant for another kernel, or an off-by-one in the caller).
  bool declared[kabi::kMaxBindings] = {};
  DispatchCommand cmd;
  size_t tg_total = 0;
  for (uint32_t p = 0; p < k.param_count; ++p) {
    const kabi::Param& param = k.params[p];
    if (param.bind == kabi::Bind::Buffer) {
      declared[param.index] = true;
      Slot& s = slots_[param.index];
      if (!s.bound)
        throw Error(ErrorKind::Validation, "dispatch of " + kname + ": nothing is bound at [[buffer(" +
                                               std::to_string(param.index) + ")]] (parameter '" +
                                               param.name + "')");
      if (s.buffer) {
        cmd.bindings.push_back({param.index, s.buffer, s.offset});
      } else {
        size_t at = (cmd.inline_bytes.size() + 15) / 16 * 16;
        cmd.inline_bytes.resize(at + s.bytes.size());
        std::memcpy(cmd.inline_bytes.data() + at, s.bytes.data(), s.bytes.size());
        cmd.bindings.push_back({param.index, nullptr, at});
      }
    } else if (param.bind == kabi::Bind::Threadgroup) {
      if (tg_lengths_[param.index] == 0)
        throw Error(ErrorKind::Validation, "dispatch of " + kname +
                                               ": no threadgroup memory length is set for [[threadgroup(" +
                                               std::to_string(param.index) + ")]] (parameter '" +
                                               param.name + "')");
      cmd.threadgroup_lengths[param.index] = tg_lengths_[param.index];
      tg_total += tg_lengths_[param.index];
    }
  }
  for (uint32_t i = 0; i < kabi::kMaxBindings; ++i)
    if (slots_[i].bound && slots_[i].since_pipeline && !declared[i])
      throw Error(ErrorKind::Validation, "dispatch of " + kname + ": [[buffer(" + std::to_string(i) +
                                             ")]] is bound but the kernel declares no such argument");
  const size_t tg_limit = cb_->device().info().max_threadgroup_memory_length;
  const size_t tg_static = pipeline_->staticThreadgroupMemoryLength();
  if (tg_total + tg_static > tg_limit)
    throw Error(ErrorKind::Validation, "dispatch of " + kname + ": " + std::to_string(tg_total + tg_static) +
                                           " bytes of threadgroup memory (" + std::to_string(tg_total) +
                                           " bound, " + std::to_string(tg_static) +
                                           " declared by the kernel) is more than the device's " +
                                           std::to_string(tg_limit));

  cmd.pipeline = pipeline_;
  cmd.launch.threads_per_grid = {uint32_t(threads.width), uint32_t(threads.height), uint32_t(threads.depth)};
  cmd.launch.threads_per_threadgroup = {uint32_t(per_group.width), uint32_t(per_group.height),
                                        uint32_t(per_group.depth)};
  cmd.groups = {uint32_t(groups.width), uint32_t(groups.height), uint32_t(groups.depth)};
  cmd.launch.threadgroups_per_grid = cmd.groups;
  cmd.encoder_label = label_;
  cb_->append(std::move(cmd));
}

}  // namespace metalsim
