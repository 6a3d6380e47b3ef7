// What compute and blit encoders share: their life cycle and common checks.
#include <typeinfo>

#include "device.h"
#include "encoders.h"
#include "memory.h"
#include "metalx/runtime/error.h"
#include "metalx/runtime/validation.h"

namespace metalsim {

using metalx::rt::Error;
using metalx::rt::ErrorKind;

SimEncoderBase::~SimEncoderBase() {
  if (!ended_) cb_->encoderAbandoned(this, where());
}

std::string SimEncoderBase::where() const {
  return metalx::rt::validation::encoderWhere(kind_, label_, cb_->describe());
}

void SimEncoderBase::requireOpen(const char* operation) const {
  metalx::rt::validation::requireOpen(ended_, operation, [this] { return where(); });
}

void SimEncoderBase::doEnd() {
  requireOpen("endEncoding");
  ended_ = true;
  cb_->encoderEnded(this);
}

void SimEncoderBase::checkBufferDevice(const metalx::rt::BufferPtr& buffer,
                                       const char* operation) const {
  if (!buffer) throw Error(ErrorKind::Validation, std::string(operation) + ": buffer is null");
  // SimBuffer is final: comparing the dynamic type is the whole of a dynamic_cast.
  auto* sim = typeid(*buffer) == typeid(SimBuffer) ? static_cast<SimBuffer*>(buffer.get()) : nullptr;
  if (!sim || &sim->simDevice() != &cb_->device())
    throw Error(ErrorKind::Validation, std::string(operation) +
                                           ": the buffer belongs to another device than the " + where());
}

}  // namespace metalsim
