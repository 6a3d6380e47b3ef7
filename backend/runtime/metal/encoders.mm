// MTLComputeCommandEncoder and MTLBlitCommandEncoder as metalx's encoders (see
// metal_objects.h). Every call is validated by the shared rules before Metal sees it.
#include "metal_objects.h"

#include <algorithm>

namespace metalx::rt::metal {

namespace {

MTLSize toMTLSize(Size3 s) { return MTLSizeMake(s.width, s.height, s.depth); }

}  // namespace

// ------------------------------------------------------------------- compute

MetalComputeEncoder::MetalComputeEncoder(std::shared_ptr<MetalCommandBuffer> cb,
                                         id<MTLComputeCommandEncoder> enc)
    : cb_(std::move(cb)), enc_(enc) {}

// Dropped without endEncoding(): Metal requires every encoder to be ended, so end it
// here and make the command buffer's commit() fail with the reason.
MetalComputeEncoder::~MetalComputeEncoder() {
  if (ended_) return;
  cb_->rules().abandoned(this, where());
  [enc_ endEncoding];
}

std::string MetalComputeEncoder::where() const {
  return validation::encoderWhere("compute", label_, cb_->rules().describe());
}

void MetalComputeEncoder::setLabel(const std::string& label) {
  label_ = label;
  @autoreleasepool {
    [enc_ setLabel:toNSString(label)];
  }
}

void MetalComputeEncoder::endEncoding() {
  validation::ExclusiveUse::Scope scope(use_, "a compute encoder");
  validation::requireOpen(ended_, "endEncoding", [this] { return where(); });
  [enc_ endEncoding];
  ended_ = true;
  cb_->rules().ended(this);
}

void MetalComputeEncoder::setComputePipeline(const ComputePipelinePtr& pipeline) {
  validation::ExclusiveUse::Scope scope(use_, "a compute encoder");
  validation::requireOpen(ended_, "setComputePipeline", [this] { return where(); });
  auto metal = std::dynamic_pointer_cast<MetalPipeline>(pipeline);
  check(metal && &metal->metalDevice() == &cb_->metalDevice(), ErrorKind::Validation,
        "setComputePipeline: the pipeline belongs to another device than the " + where());
  [enc_ setComputePipelineState:metal->handle()];
  cb_->retain(metal);
  pipeline_ = std::move(metal);
  bindings_.pipelineSet();
}

void MetalComputeEncoder::setBuffer(const BufferPtr& buffer, size_t offset, uint32_t index) {
  validation::ExclusiveUse::Scope scope(use_, "a compute encoder");
  const char* op = "setBuffer";
  validation::requireOpen(ended_, op, [this] { return where(); });
  validation::bindingIndex(index, kMaxBufferBindings, op);
  MetalBuffer& b = checkBuffer(buffer, cb_->metalDevice(), op, where());
  validation::bufferOffset(offset, b.length(), index);
  // An empty view at the very end (offset == length) is allowed by the interface;
  // Metal's validation wants offsets inside the buffer. Nothing can be read through an
  // empty view, so it is bound at the buffer's start instead.
  const size_t bind_at = offset < b.length() ? offset : 0;
  [enc_ setBuffer:b.handle() offset:bind_at atIndex:index];
  cb_->retain(buffer);
  bindings_.bufferBound(index);
}

void MetalComputeEncoder::setBytes(const void* bytes, size_t length, uint32_t index) {
  validation::ExclusiveUse::Scope scope(use_, "a compute encoder");
  const char* op = "setBytes";
  validation::requireOpen(ended_, op, [this] { return where(); });
  validation::bindingIndex(index, kMaxBufferBindings, op);
  validation::inlineBytes(length);
  [enc_ setBytes:bytes length:length atIndex:index];
  bindings_.bufferBound(index);
}

void MetalComputeEncoder::setThreadgroupMemoryLength(size_t length, uint32_t index) {
  validation::ExclusiveUse::Scope scope(use_, "a compute encoder");
  const char* op = "setThreadgroupMemoryLength";
  validation::requireOpen(ended_, op, [this] { return where(); });
  validation::bindingIndex(index, kMaxThreadgroupMemoryBindings, op);
  validation::threadgroupMemoryLength(length, cb_->metalDevice().info().max_threadgroup_memory_length);
  [enc_ setThreadgroupMemoryLength:length atIndex:index];
  bindings_.threadgroup_lengths[index] = length;
}

bool MetalComputeEncoder::validateDispatch(Size3 threads, Size3 per_group) {
  return validation::dispatch(pipeline_.get(), threads, per_group, bindings_,
                              cb_->metalDevice().info().max_threadgroup_memory_length, [this] { return where(); });
}

void MetalComputeEncoder::dispatchThreads(Size3 threads, Size3 per_group) {
  validation::ExclusiveUse::Scope scope(use_, "a compute encoder");
  validation::requireOpen(ended_, "dispatchThreads", [this] { return where(); });
  if (!validateDispatch(threads, per_group)) return;  // an empty grid runs nothing
  // Non-uniform threadgroups (a partial group at each edge): every Apple-silicon GPU
  // supports them.
  [enc_ dispatchThreads:toMTLSize(threads) threadsPerThreadgroup:toMTLSize(per_group)];
}

void MetalComputeEncoder::dispatchThreadgroups(Size3 groups, Size3 per_group) {
  validation::ExclusiveUse::Scope scope(use_, "a compute encoder");
  validation::requireOpen(ended_, "dispatchThreadgroups", [this] { return where(); });
  Size3 threads{groups.width * per_group.width, groups.height * per_group.height,
                groups.depth * per_group.depth};
  if (!validateDispatch(threads, per_group)) return;
  [enc_ dispatchThreadgroups:toMTLSize(groups) threadsPerThreadgroup:toMTLSize(per_group)];
}

// ------------------------------------------------------------------- blit

MetalBlitEncoder::MetalBlitEncoder(std::shared_ptr<MetalCommandBuffer> cb,
                                   id<MTLBlitCommandEncoder> enc)
    : cb_(std::move(cb)), enc_(enc) {}

MetalBlitEncoder::~MetalBlitEncoder() {
  if (ended_) return;
  cb_->rules().abandoned(this, where());
  [enc_ endEncoding];
}

std::string MetalBlitEncoder::where() const {
  return validation::encoderWhere("blit", label_, cb_->rules().describe());
}

void MetalBlitEncoder::setLabel(const std::string& label) {
  label_ = label;
  @autoreleasepool {
    [enc_ setLabel:toNSString(label)];
  }
}

void MetalBlitEncoder::endEncoding() {
  validation::ExclusiveUse::Scope scope(use_, "a blit encoder");
  validation::requireOpen(ended_, "endEncoding", [this] { return where(); });
  [enc_ endEncoding];
  ended_ = true;
  cb_->rules().ended(this);
}

void MetalBlitEncoder::copyBuffer(const BufferPtr& src, size_t src_offset, const BufferPtr& dst,
                                  size_t dst_offset, size_t size) {
  validation::ExclusiveUse::Scope scope(use_, "a blit encoder");
  const char* op = "copyBuffer";
  validation::requireOpen(ended_, op, [this] { return where(); });
  MetalBuffer& s = checkBuffer(src, cb_->metalDevice(), op, where());
  MetalBuffer& d = checkBuffer(dst, cb_->metalDevice(), op, where());
  if (!validation::copy(src_offset, s.length(), dst_offset, d.length(), size, src == dst)) return;
  for (size_t done = 0; done < size;) {
    const size_t chunk = std::min(size - done, validation::kMaxBlitChunk);
    [enc_ copyFromBuffer:s.handle()
            sourceOffset:src_offset + done
                toBuffer:d.handle()
       destinationOffset:dst_offset + done
                    size:chunk];
    done += chunk;
  }
  cb_->retain(src);
  cb_->retain(dst);
}

void MetalBlitEncoder::fillBuffer(const BufferPtr& buffer, size_t offset, size_t length,
                                  uint8_t value) {
  validation::ExclusiveUse::Scope scope(use_, "a blit encoder");
  const char* op = "fillBuffer";
  validation::requireOpen(ended_, op, [this] { return where(); });
  MetalBuffer& b = checkBuffer(buffer, cb_->metalDevice(), op, where());
  validation::fill(offset, length, b.length());
  for (size_t done = 0; done < length;) {
    const size_t chunk = std::min(length - done, validation::kMaxBlitChunk);
    [enc_ fillBuffer:b.handle() range:NSMakeRange(offset + done, chunk) value:value];
    done += chunk;
  }
  cb_->retain(buffer);
}

}  // namespace metalx::rt::metal
