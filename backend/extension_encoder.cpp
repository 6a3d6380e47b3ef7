// The encoder handed to C++ extensions (see extension_encoder.h).
#include "extension_encoder.h"

#include <c10/util/Exception.h>

namespace metalx {

void ExtensionEncoder::endEncoding() {
  TORCH_CHECK(false, "metalx::ext::encodeCompute: the encoder belongs to the metalx stream, which ends "
                     "and commits it; an extension must not call endEncoding() (use metalx::ext::flush() "
                     "or synchronize() to commit)");
}

void ExtensionEncoder::setComputePipeline(const rt::ComputePipelinePtr& pipeline) {
  TORCH_CHECK(pipeline, "metalx::ext::encodeCompute: setComputePipeline() got a null pipeline");
  shared_.setComputePipeline(pipeline);
  pipeline_ = pipeline;
}

void ExtensionEncoder::setBuffer(const rt::BufferPtr& buffer, size_t offset, uint32_t index) {
  TORCH_CHECK(buffer, "metalx::ext::encodeCompute: setBuffer() got a null buffer for [[buffer(", index, ")]]");
  shared_.setBuffer(buffer, offset, index);
  buffers_bound_.insert(index);
}

void ExtensionEncoder::setBytes(const void* bytes, size_t length, uint32_t index) {
  shared_.setBytes(bytes, length, index);
  buffers_bound_.insert(index);
}

void ExtensionEncoder::setThreadgroupMemoryLength(size_t length, uint32_t index) {
  shared_.setThreadgroupMemoryLength(length, index);
  threadgroup_bound_.insert(index);
}

void ExtensionEncoder::checkReadyToDispatch() const {
  TORCH_CHECK(pipeline_, "metalx::ext::encodeCompute: dispatch without setComputePipeline() in the same "
                         "call; the shared encoder still holds another kernel's pipeline");
  for (const rt::KernelArgument& a : pipeline_->arguments()) {
    const bool buffer = a.kind == rt::KernelArgument::Kind::Buffer;
    const auto& bound = buffer ? buffers_bound_ : threadgroup_bound_;
    TORCH_CHECK(bound.count(a.index), "metalx::ext::encodeCompute: ", pipeline_->functionName(), " declares ",
                a.name, buffer ? " [[buffer(" : " [[threadgroup(", a.index, ")]] but it was not bound before the "
                "dispatch (", buffer ? "setBuffer/setBytes" : "setThreadgroupMemoryLength",
                "); an unbound argument would read what an earlier kernel left in the shared encoder");
  }
}

void ExtensionEncoder::dispatchThreads(rt::Size3 threads, rt::Size3 threads_per_threadgroup) {
  checkReadyToDispatch();
  shared_.dispatchThreads(threads, threads_per_threadgroup);
}

void ExtensionEncoder::dispatchThreadgroups(rt::Size3 threadgroups, rt::Size3 threads_per_threadgroup) {
  checkReadyToDispatch();
  shared_.dispatchThreadgroups(threadgroups, threads_per_threadgroup);
}

}  // namespace metalx
