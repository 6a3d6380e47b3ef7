// Pipeline lookup for the launch layer: every native op finds its kernel here.
//
// Built-in kernels of one op are named "<op>_<variant>_<dtype>" (kernels/elementwise.h
// documents the scheme). A KernelFamily is one op's set of them: it builds each name
// once, on first use on a device, and keeps the pipeline in a flat table indexed by
// (variant, dtype), so a launch costs two array lookups and an atomic load — no string,
// no allocation, no lock. The tables are bounded by construction (one slot per built-in
// kernel) and hold their pipelines for the life of the process, as the fill and copy
// paths always have.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include <c10/util/Exception.h>

#include "core/stream.h"
#include "launch/dtype.h"
#include "metalx/runtime/pipeline_cache.h"

namespace metalx::launch {

using kernels::DType;

// How a kernel walks its operands (the "<variant>" part of its name).
enum class Variant : uint8_t {
  Dense,         // "dense": every operand contiguous in one order
  DenseScalarA,  // "dense_sv": first input one value, the rest dense
  DenseScalarB,  // "dense_vs": second input one value
  Strided,       // "strided": sizes and strides inline, 32-bit indexing
  Strided64,     // "strided64": the same with 64-bit indexing
  Plain,         // "": kernels with no variants (optimizers)
  Rows,          // "rows": reductions along rows (kernels/reduce.metal)
  Columns,       // "cols": reductions over outer dims
  Partials,      // "partials": the second pass of a reduction split into parts
  DenseOpmathB,      // "dense_vm": binary, b one value in the compute type (float for half
                     // and bfloat, unrounded), a dense
  StridedOpmathB,    // "strided_vm": the same, a and the output strided, 32-bit indexing
  Strided64OpmathB,  // "strided64_vm": the same with 64-bit indexing
};
constexpr int kNumVariants = 12;
const char* variantName(Variant v);

// A set of dtypes, as a bit mask over kernels::DType.
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> types) {
    for (DType t : types) bits_ |= bit(t);
  }
  constexpr bool has(DType t) const { return (bits_ & bit(t)) != 0; }
  constexpr DTypeSet operator|(DTypeSet o) const { return DTypeSet(bits_ | o.bits_); }

 private:
  constexpr explicit DTypeSet(uint32_t bits) : bits_(bits) {}
  static constexpr uint32_t bit(DType t) { return 1u << static_cast<int>(t); }
  uint32_t bits_ = 0;
};

// The dtype sets kernels are instantiated for (kernels/elementwise.h's METALX_FOR_*).
inline constexpr DTypeSet kFloatTypes{DType::Float32, DType::Float16, DType::BFloat16};
inline constexpr DTypeSet kIntTypes{DType::Int64, DType::Int32, DType::Int16, DType::Int8, DType::UInt8};
inline constexpr DTypeSet kNumberTypes = kFloatTypes | kIntTypes;
inline constexpr DTypeSet kAllTypes = kNumberTypes | DTypeSet{DType::Bool};

constexpr int kMaxDevices = 64;

// Pipelines of a fixed set of built-in kernels, slot by slot, per device: a slot's
// kernel is looked up by name once, on its first use on a device, then read with an
// atomic load (no string, no allocation, no lock). Bounded by construction (kSlots per
// device); the pipelines live as long as the table.
template <int kSlots>
class PipelineSlots {
 public:
  PipelineSlots() = default;
  PipelineSlots(const PipelineSlots&) = delete;
  PipelineSlots& operator=(const PipelineSlots&) = delete;
  ~PipelineSlots() {
    for (auto& t : tables_) delete t.load(std::memory_order_acquire);
  }

  // The pipeline in `slot` on the stream's device; `name()` gives its kernel's name
  // (called on the first use only).
  template <class NameFn>
  const rt::ComputePipelinePtr& get(Stream& stream, int slot, NameFn&& name) {
    TORCH_INTERNAL_ASSERT(slot >= 0 && slot < kSlots, "metalx: pipeline slot ", slot, " out of range");
    Table& t = table(stream.deviceIndex());
    Slot& s = t.slots[slot];
    if (s.ready.load(std::memory_order_acquire)) return s.pipeline;
    std::lock_guard<std::mutex> lock(t.mutex);
    if (!s.ready.load(std::memory_order_relaxed)) {
      s.pipeline = stream.pipelines().builtin(name());
      s.ready.store(true, std::memory_order_release);
    }
    return s.pipeline;
  }

 private:
  struct Slot {
    std::atomic<bool> ready{false};
    rt::ComputePipelinePtr pipeline;
  };
  struct Table {
    std::mutex mutex;  // taken only to fill a slot
    std::array<Slot, kSlots> slots;
  };
  Table& table(int device_index) {
    TORCH_CHECK(device_index >= 0 && device_index < kMaxDevices, "metalx supports at most ", kMaxDevices,
                " devices, got device index ", device_index);
    Table* t = tables_[device_index].load(std::memory_order_acquire);
    if (t) return *t;
    std::lock_guard<std::mutex> lock(tables_mutex_);
    t = tables_[device_index].load(std::memory_order_relaxed);
    if (!t) {
      t = new Table();
      tables_[device_index].store(t, std::memory_order_release);
    }
    return *t;
  }

  std::atomic<Table*> tables_[kMaxDevices] = {};
  std::mutex tables_mutex_;
};

class KernelFamily {
 public:
  // `op`: the kernels' name prefix; `dtypes`: the dtypes they exist for; `predicate`:
  // the kernels write bool whatever their input type (comparisons, isnan, ...);
  // `opmath_scalar_b`: the op has the _vm variants for half and bfloat, which take a
  // second input that is one value in float, unrounded (CPU's mul and div).
  KernelFamily(const char* op, DTypeSet dtypes, bool predicate = false, bool opmath_scalar_b = false)
      : op_(op), dtypes_(dtypes), predicate_(predicate), opmath_scalar_b_(opmath_scalar_b) {}
  KernelFamily(const KernelFamily&) = delete;
  KernelFamily& operator=(const KernelFamily&) = delete;

  const char* op() const { return op_; }
  bool supports(DType t) const { return dtypes_.has(t); }
  bool predicate() const { return predicate_; }
  bool opmathScalarB() const { return opmath_scalar_b_; }
  // The pipeline of this op's kernel for `variant` and `dtype` on the stream's device.
  // The dtype must be supported.
  const rt::ComputePipelinePtr& pipeline(Stream& stream, Variant variant, DType dtype);
  // Its name, as in the built-in library.
  std::string kernelName(Variant variant, DType dtype) const;

 private:
  const char* op_;
  DTypeSet dtypes_;
  bool predicate_;
  bool opmath_scalar_b_;
  PipelineSlots<kNumVariants * kernels::kNumDTypes> pipelines_;
};

}  // namespace metalx::launch
