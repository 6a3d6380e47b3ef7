// What compute and blit encoders share: their life cycle and common checks.
#include "device.h"
#include "encoders.h"
#include "memory.h"
#include "metalx/runtime/error.h"

namespace metalsim {

using metalx::rt::Error;
using metalx::rt::ErrorKind;

SimEncoderBase::~SimEncoderBase() {
  if (!ended_) cb_->encoderAbandoned(this, where());
}

std::string SimEncoderBase::where() const {
  std::string s = std::string(kind_) + " encoder";
  if (!label_.empty()) s += " '" + label_ + "'";
  return s + " of " + cb_->describe();
}

void SimEncoderBase::requireOpen(const char* operation) const {
  if (ended_)
    throw Error(ErrorKind::Validation,
                std::string(operation) + ": the " + where() + " has already ended (endEncoding)");
}

void SimEncoderBase::doEnd() {
  requireOpen("endEncoding");
  ended_ = true;
  cb_->encoderEnded(this);
}

void SimEncoderBase::checkBufferDevice(const metalx::rt::BufferPtr& buffer,
                                       const char* operation) const {
  if (!buffer) throw Error(ErrorKind::Validation, std::string(operation) + ": buffer is null");
  auto* sim = dynamic_cast<SimBuffer*>(buffer.get());
  if (!sim || &sim->simDevice() != &cb_->device())
    throw Error(ErrorKind::Validation, std::string(operation) +
                                           ": the buffer belongs to another device than the " + where());
}

}  // namespace metalsim
