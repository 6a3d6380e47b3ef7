// A simulated MTLComputeCommandEncoder (see encoders.h).
#include <algorithm>
#include <cstring>
#include <typeinfo>

#include "device.h"
#include "encoders.h"
#include "library.h"
#include "metalx/runtime/error.h"
#include "metalx/runtime/validation.h"

namespace metalsim {

namespace rules = metalx::rt::validation;
using metalx::rt::Error;
using metalx::rt::ErrorKind;
using metalx::rt::Size3;


void SimComputeEncoder::endEncoding() {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  doEnd();
}

void SimComputeEncoder::setComputePipeline(const metalx::rt::ComputePipelinePtr& pipeline) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  requireOpen("setComputePipeline");
  bindPipeline(pipeline);
}

void SimComputeEncoder::bindPipeline(const metalx::rt::ComputePipelinePtr& pipeline) {
  // The pipeline already set was checked when it was set (and is kept alive by it):
  // setting it again, as a stream of one op does, costs no type check and no reference.
  if (!pipeline || pipeline_.get() != pipeline.get()) {
    // SimPipeline is final: comparing the dynamic type is the whole of a dynamic_cast.
    auto* sim = pipeline && typeid(*pipeline) == typeid(SimPipeline) ? static_cast<SimPipeline*>(pipeline.get())
                                                                     : nullptr;
    if (!sim || &sim->device() != &cb_->device())
      throw Error(ErrorKind::Validation,
                  "setComputePipeline: the pipeline belongs to another device than the " + where());
    pipeline_ = std::static_pointer_cast<SimPipeline>(pipeline);
  }
  bound_.pipelineSet();
}

void SimComputeEncoder::setBuffer(const metalx::rt::BufferPtr& buffer, size_t offset, uint32_t index) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  requireOpen("setBuffer");
  bindBuffer(buffer, offset, index);
}

void SimComputeEncoder::bindBuffer(const metalx::rt::BufferPtr& buffer, size_t offset, uint32_t index) {
  const char* op = "setBuffer";
  rules::bindingIndex(index, metalx::rt::kMaxBufferBindings, op);
  Slot& s = slots_[index];
  // A buffer already in this slot was checked when it was bound (and the slot keeps it
  // alive, so the pointer is still that buffer): rebinding it, at another offset or
  // not, skips the device check and the reference count.
  const bool rebound = buffer && s.buffer.get() == buffer.get();
  if (!rebound) checkBufferDevice(buffer, op);
  rules::bufferOffset(offset, buffer->length(), index);
  bound_.bufferBound(index);
  if (!rebound) s.buffer = buffer;
  s.offset = offset;
  s.bytes.clear();
}

void SimComputeEncoder::setBytes(const void* bytes, size_t length, uint32_t index) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  requireOpen("setBytes");
  bindBytes(bytes, length, index);
}

void SimComputeEncoder::bindBytes(const void* bytes, size_t length, uint32_t index) {
  rules::bindingIndex(index, metalx::rt::kMaxBufferBindings, "setBytes");
  rules::inlineBytes(length);
  bound_.bufferBound(index);
  Slot& s = slots_[index];
  s.buffer.reset();
  s.offset = 0;
  s.bytes.assign(static_cast<const unsigned char*>(bytes), static_cast<const unsigned char*>(bytes) + length);
}

void SimComputeEncoder::setThreadgroupMemoryLength(size_t length, uint32_t index) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  const char* op = "setThreadgroupMemoryLength";
  requireOpen(op);
  rules::bindingIndex(index, metalx::rt::kMaxThreadgroupMemoryBindings, op);
  rules::threadgroupMemoryLength(length, cb_->device().info().max_threadgroup_memory_length);
  bound_.threadgroup_lengths[index] = length;
}

void SimComputeEncoder::dispatchThreads(Size3 threads, Size3 per_group) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  requireOpen("dispatchThreads");
  dispatchThreadsChecked(threads, per_group);
}

void SimComputeEncoder::dispatchThreadsChecked(Size3 threads, Size3 per_group) {
  dispatch(threads, per_group,
           {rules::groupsFor(threads.width, per_group.width), rules::groupsFor(threads.height, per_group.height),
            rules::groupsFor(threads.depth, per_group.depth)});
}

void SimComputeEncoder::encodeDispatchThreads(const metalx::rt::ComputePipelinePtr& pipeline,
                                              const Argument* arguments, uint32_t count, Size3 threads,
                                              Size3 per_group) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  requireOpen("setComputePipeline");
  bindPipeline(pipeline);
  for (uint32_t i = 0; i < count; ++i) {
    const Argument& a = arguments[i];
    if (a.bytes) bindBytes(a.bytes, a.length, i);
    else bindBuffer(*a.buffer, a.offset, i);
  }
  dispatchThreadsChecked(threads, per_group);
}

void SimComputeEncoder::dispatchThreadgroups(Size3 groups, Size3 per_group) {
  ExclusiveUse::Scope scope(use_, "a compute encoder");
  requireOpen("dispatchThreadgroups");
  dispatch({groups.width * per_group.width, groups.height * per_group.height,
            groups.depth * per_group.depth},
           per_group, groups);
}

void SimComputeEncoder::dispatch(Size3 threads, Size3 per_group, Size3 groups) {
  if (!rules::dispatch(pipeline_.get(), threads, per_group, bound_,
                       cb_->device().info().max_threadgroup_memory_length, [this] { return where(); }))
    return;  // an empty grid: nothing to run
  // Snapshot what the kernel declares: later bindings must not change this dispatch.
  // The command is built in place in the command buffer, its inline bytes sized first.
  const kabi::KernelInfo& k = pipeline_->kernel();
  size_t inline_size = 0, binding_count = 0;
  bool threadgroup_params = false;
  for (uint32_t p = 0; p < k.param_count; ++p) {
    const kabi::Param& param = k.params[p];
    if (param.bind == kabi::Bind::Threadgroup) threadgroup_params = true;
    if (param.bind != kabi::Bind::Buffer) continue;
    ++binding_count;
    const Slot& s = slots_[param.index];
    if (!s.buffer) inline_size = (inline_size + 15) / 16 * 16 + s.bytes.size();
  }
  DispatchCommand& cmd = cb_->appendDispatch();
  if (binding_count > DispatchCommand::kInlineBindings)
    cmd.more_bindings.reserve(binding_count - DispatchCommand::kInlineBindings);
  cmd.inline_size = inline_size;
  if (inline_size > DispatchCommand::kSmallBytes) cmd.large_bytes.resize(inline_size);
  if (threadgroup_params) {
    std::fill(std::begin(cmd.threadgroup_lengths), std::end(cmd.threadgroup_lengths), size_t(0));
    cmd.has_threadgroup_lengths = true;
  }
  unsigned char* bytes = cmd.inlineBytes();
  size_t at = 0;
  for (uint32_t p = 0; p < k.param_count; ++p) {
    const kabi::Param& param = k.params[p];
    if (param.bind == kabi::Bind::Buffer) {
      Slot& s = slots_[param.index];
      if (s.buffer) {
        cb_->retain(s.buffer);
        cmd.addBinding(param.index, s.buffer.get(), s.offset, 0);
      } else {
        at = (at + 15) / 16 * 16;
        std::memcpy(bytes + at, s.bytes.data(), s.bytes.size());
        cmd.addBinding(param.index, nullptr, at, s.bytes.size());
        at += s.bytes.size();
      }
    } else if (param.bind == kabi::Bind::Threadgroup) {
      cmd.threadgroup_lengths[param.index] = bound_.threadgroup_lengths[param.index];
    }
  }
  cb_->retain(pipeline_);
  cmd.pipeline = pipeline_.get();
  cmd.launch.threads_per_grid = {uint32_t(threads.width), uint32_t(threads.height), uint32_t(threads.depth)};
  cmd.launch.threads_per_threadgroup = {uint32_t(per_group.width), uint32_t(per_group.height),
                                        uint32_t(per_group.depth)};
  // Field by field from the values, not one copied from the other: the copy read the
  // three 4-byte fields just stored back with wider loads, which stalls store
  // forwarding and cost a third of this function's time.
  const uint32_t gx = uint32_t(groups.width), gy = uint32_t(groups.height), gz = uint32_t(groups.depth);
  cmd.groups.x = gx, cmd.groups.y = gy, cmd.groups.z = gz;
  cmd.launch.threadgroups_per_grid.x = gx, cmd.launch.threadgroups_per_grid.y = gy;
  cmd.launch.threadgroups_per_grid.z = gz;
  if (!label_.empty()) cmd.encoder_label = label_;
}

}  // namespace metalsim
