// Device-side index checks, host side: each stream has a small error record in shared
// memory into which its kernels write the first out-of-range index they meet (see
// kernels/index_check.metal); the host reads the device's records whenever it waits for
// the device anyway and raises the error there, as CUDA's device-side asserts surface
// at the next synchronisation. Index checks therefore cost no host wait per op. A
// record per stream, not per device: the check kernels' scratch (the pending
// position) must not be shared by streams that run at the same time.
//
// What the error names: that it was a device-side check, the op, and CPU's own message
// ("index 7 is out of bounds for dimension 0 with size 5"), with CPU's exception type
// (IndexError or RuntimeError). The record is cleared when it is raised, so the process
// stays usable and an error is reported once. The first error wins: later ones before
// the raise are dropped (they are usually consequences of the first).
//
// METALX_SYNC_INDEX_CHECKS=1 (read once, like CUDA_LAUNCH_BLOCKING) makes every check
// wait for its result, so the op itself raises CPU's exact error; slower, for debugging
// and for tests that expect the error at the op.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace at {
class Tensor;
}

namespace metalx {

// How an error is worded: CPU's message for each kind of check.
enum class IndexMessage : uint32_t {
  Bounds = 1,            // RuntimeError "index V is out of bounds for dimension D with size S"
  BoundsIndexError,      // the same text as an IndexError (advanced indexing, index_fill_)
  IndexCopy,             // IndexError "index_copy_(): index V is out of bounds for dimension D with size S"
  OutOfRangeInSelf,      // IndexError "index out of range in self" (index_select, embedding)
  FlatOutOfRange,        // IndexError "out of range: tried to access index V on a tensor of S elements."
  Target,                // IndexError "Target V is out of bounds." (nll_loss)
  EmbeddingBagIndex,     // RuntimeError "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be V"
  OffsetsStart,          // RuntimeError "offsets[0] has to be 0, ... However, got V"
  OffsetsEnd,            // RuntimeError "offsets[-1] can not be greater than input's length S but got offsets[-1] of V"
};

// CPU's message for a bad value `value` checked against `size` along `dim`.
std::string indexErrorMessage(IndexMessage kind, int64_t value, int64_t size, int64_t dim);
// True when CPU raises it as an IndexError (else a RuntimeError).
bool isIndexError(IndexMessage kind);

// Mirrors kernels/index_check.metal's IndexErrorRecord.
struct IndexErrorRecord {
  uint32_t pending;
  uint32_t op;
  uint32_t message;
  uint32_t unused;
  int64_t value;
  int64_t size;
  int64_t dim;
};

// The record of the device's current stream (int32 words of host memory the device
// sees), created on first use.
const at::Tensor& indexErrorRecord(c10::DeviceIndex device);

// A small id for `op` (a string literal) to put in the record; stable for the process.
uint32_t indexCheckOpId(const char* op);

// True when METALX_SYNC_INDEX_CHECKS=1: checks raise at the op.
bool syncIndexChecks();

// Raises an index error recorded by any stream of the device, if any, and clears it.
// Call after a wait: what the waited work wrote has completed; other streams' records
// are complete or empty (the op id is written last).
void raiseDeviceIndexError(c10::DeviceIndex device);

}  // namespace metalx
