// The buffer of a tensor for binding it to a kernel, without a reference count.
//
// bufferFor(tensor) (allocator.h) returns a BufferPtr by value: an atomic increment and
// decrement per operand per launch, on a count the queue's thread also touches. A
// launch only needs the buffer while it encodes, and the tensor keeps it alive for that.
#pragma once

#include <cstddef>

#include "metalx/runtime/buffer.h"

namespace at {
class Tensor;
}

namespace metalx {

// The buffer holding `tensor`'s first element, and in `*offset` that element's byte
// offset in it. For storages metalx allocated, the reference is the storage's own
// (valid while the tensor lives; constant time, no lock); for others (shared between
// processes, foreign pointers) the buffer is put in `*holder` and that is returned.
const rt::BufferPtr& bufferRefFor(const at::Tensor& tensor, size_t* offset, rt::BufferPtr* holder);

}  // namespace metalx
