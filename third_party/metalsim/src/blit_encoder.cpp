// A simulated MTLBlitCommandEncoder (see encoders.h).
#include "encoders.h"
#include "metalx/runtime/error.h"
#include "metalx/runtime/validation.h"

namespace metalsim {

using metalx::rt::Error;
using metalx::rt::ErrorKind;


void SimBlitEncoder::endEncoding() {
  ExclusiveUse::Scope scope(use_, "a blit encoder");
  doEnd();
}

void SimBlitEncoder::copyBuffer(const metalx::rt::BufferPtr& src, size_t src_offset,
                                const metalx::rt::BufferPtr& dst, size_t dst_offset, size_t size) {
  ExclusiveUse::Scope scope(use_, "a blit encoder");
  const char* op = "copyBuffer";
  requireOpen(op);
  checkBufferDevice(src, op);
  checkBufferDevice(dst, op);
  if (!metalx::rt::validation::copy(src_offset, src->length(), dst_offset, dst->length(), size, src == dst))
    return;  // nothing to copy
  cb_->append(CopyCommand{src, dst, src_offset, dst_offset, size});
}

void SimBlitEncoder::fillBuffer(const metalx::rt::BufferPtr& buffer, size_t offset, size_t length,
                                uint8_t value) {
  ExclusiveUse::Scope scope(use_, "a blit encoder");
  const char* op = "fillBuffer";
  requireOpen(op);
  checkBufferDevice(buffer, op);
  metalx::rt::validation::fill(offset, length, buffer->length());
  cb_->append(FillCommand{buffer, offset, length, value});
}

}  // namespace metalsim
