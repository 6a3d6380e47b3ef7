// Simulated device memory (see memory.h).
#include "memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "config.h"
#include "device.h"
#include "metalx/runtime/error.h"

namespace metalsim {
namespace {

using metalx::rt::Error;
using metalx::rt::ErrorKind;

// Large buffers come straight from mmap: zero pages are free until touched, as fresh
// GPU allocations are. Small ones from the heap. Sanitized builds use the heap for
// everything so AddressSanitizer puts red zones around each buffer.
constexpr size_t kMmapThreshold = 256 << 10;
constexpr size_t kAlignment = 256;  // Metal buffers are at least 256-byte aligned

}  // namespace

SimBuffer::SimBuffer(SimDevice& device, size_t length) : device_(device), length_(length) {
  bool use_mmap = length >= kMmapThreshold;
#if METALSIM_SANITIZE
  use_mmap = false;
#endif
  if (use_mmap) {
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw Error(ErrorKind::OutOfMemory,
                  "the system could not provide " + std::to_string(length) + " bytes");
    data_ = p;
    mapped_ = length;
  } else {
    data_ = std::aligned_alloc(kAlignment, (length + kAlignment - 1) / kAlignment * kAlignment);
    if (!data_)
      throw Error(ErrorKind::OutOfMemory,
                  "the system could not provide " + std::to_string(length) + " bytes");
    if (!config().strict) std::memset(data_, 0, length);
  }
  if (config().strict) std::memset(data_, kPoisonByte, length);
}

SimBuffer::SimBuffer(SimDevice& device, void* ptr, size_t length,
                     std::function<void()> deallocator)
    : device_(device), data_(ptr), length_(length), owned_(false),
      deallocator_(std::move(deallocator)) {}

SimBuffer::~SimBuffer() {
  if (owned_) {
    if (mapped_) munmap(data_, mapped_);
    else std::free(data_);
  } else if (deallocator_) {
    deallocator_();
  }
  device_.released(length_);
}

metalx::rt::Device& SimBuffer::device() { return device_; }

}  // namespace metalsim
