// The elementwise launcher: runs one op's kernels (kernels/elementwise.h) over the
// operands of an at::TensorIterator, as CPU, CUDA and MPS run theirs.
//
// The iterator brings broadcasting, type promotion, output allocation and resizing,
// out= and overlap checks (torch's meta functions build it: backend/launch/structured.h).
// This picks the kernel variant per call:
//   - every operand dense in the iterator's order         -> <op>_dense
//   - binary, one input a single value, the rest dense     -> <op>_dense_sv / _dense_vs
//     (a CPU scalar is passed inline, a device one bound where it lies)
//   - anything else                                        -> <op>_strided (32-bit
//     indexing) or <op>_strided64, sizes and strides inline; CPU scalars inline with
//     stride 0
// Inputs whose dtype is not the kernel's are cast first, and an output of another dtype
// is written through a temporary (CPU's TensorIterator does the same); past 8 dims the
// operands are made contiguous first.
#pragma once

#include <ATen/TensorIterator.h>
#include <c10/util/ArrayRef.h>

#include <optional>

#include "launch/kernel_table.h"

namespace metalx::launch {

struct ElementwiseOptions {
  // The op's scalars (alpha, min, ...), converted to the kernel's compute type.
  c10::ArrayRef<at::Scalar> scalars = {};
  // Inputs before this index keep their own dtype, which the kernel fixes (where's
  // bool condition); the kernel's dtype is that of the inputs from here on.
  int first_typed_input = 0;
  // The kernel dtype when the caller knows it (the launcher's own normalised iterators,
  // which carry no promotion of their own).
  std::optional<c10::ScalarType> dtype = std::nullopt;
};

// The kernel dtype `kernels` would run `iter` in (its common input dtype).
c10::ScalarType elementwiseDtype(const at::TensorIteratorBase& iter, int first_typed_input = 0,
                                 std::optional<c10::ScalarType> known = std::nullopt);

// Runs `kernels` over `iter` (one output; one, two or three inputs) on the current
// stream of its device. The kernel dtype must be supported (check elementwiseDtype
// against kernels.supports first, and fall back to the CPU otherwise).
void runElementwise(at::TensorIteratorBase& iter, KernelFamily& kernels, const ElementwiseOptions& options = {});

// torch's dtype as the kernels name it, or nullopt if no kernel has it.
std::optional<DType> kernelDtype(c10::ScalarType t);
// kernelDtype, plus float64 where `kernels` implement it in integer arithmetic (Metal has
// no double; kernels/float64_bits.h).
std::optional<DType> kernelDtypeFor(c10::ScalarType t, const KernelFamily& kernels);

}  // namespace metalx::launch
