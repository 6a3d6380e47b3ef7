// A simulated MTLBlitCommandEncoder (see encoders.h).
#include "encoders.h"
#include "metalx/runtime/error.h"

namespace metalsim {

using metalx::rt::Error;
using metalx::rt::ErrorKind;

namespace {

void requireAligned(size_t value, const char* what, const char* operation) {
  if (value % 4 != 0)
    throw Error(ErrorKind::Validation, std::string(operation) + ": " + what + " (" +
                                           std::to_string(value) +
                                           ") must be a multiple of 4 bytes, as Metal requires on macOS");
}

void requireInside(size_t offset, size_t size, size_t length, const char* which, const char* operation) {
  if (offset > length || size > length - offset)
    throw Error(ErrorKind::Validation,
                std::string(operation) + ": bytes [" + std::to_string(offset) + ", " +
                    std::to_string(offset + size) + ") are outside the " + which + " buffer (" +
                    std::to_string(length) + " bytes)");
}

}  // namespace

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
  requireAligned(src_offset, "source offset", op);
  requireAligned(dst_offset, "destination offset", op);
  requireAligned(size, "size", op);
  requireInside(src_offset, size, src->length(), "source", op);
  requireInside(dst_offset, size, dst->length(), "destination", op);
  if (src == dst && src_offset < dst_offset + size && dst_offset < src_offset + size && size > 0)
    throw Error(ErrorKind::Validation,
                "copyBuffer: source and destination ranges overlap in the same buffer");
  if (size == 0) return;
  cb_->append(CopyCommand{src, dst, src_offset, dst_offset, size});
}

void SimBlitEncoder::fillBuffer(const metalx::rt::BufferPtr& buffer, size_t offset, size_t length,
                                uint8_t value) {
  ExclusiveUse::Scope scope(use_, "a blit encoder");
  const char* op = "fillBuffer";
  requireOpen(op);
  checkBufferDevice(buffer, op);
  if (length == 0) throw Error(ErrorKind::Validation, "fillBuffer: length must be greater than 0");
  requireAligned(offset, "offset", op);
  requireAligned(length, "length", op);
  requireInside(offset, length, buffer->length(), "filled", op);
  cb_->append(FillCommand{buffer, offset, length, value});
}

}  // namespace metalsim
