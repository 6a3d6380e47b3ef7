// Random number generators for metalx devices.
//
// The state is counter-based, as CUDA's Philox generator: a seed and an offset.
// A kernel that draws random numbers reserves a range of the counter with
// reserve() and computes its numbers from (seed, offset, thread index), so results
// depend only on the state, not on how threads are scheduled. get_state() /
// set_state() round-trip exactly these two numbers.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>
#include <mutex>

namespace metalx {

class MetalxGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit MetalxGeneratorImpl(c10::DeviceIndex device_index);

  void set_current_seed(uint64_t seed) override;  // also rewinds the offset to 0
  uint64_t current_seed() const override;
  uint64_t seed() override;  // reseeds from a non-deterministic source
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  // A CPU uint8 tensor of kStateBytes: seed then offset, little-endian uint64s.
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  void set_state(const c10::TensorImpl& new_state) override;

  struct PhiloxInputs {
    uint64_t seed;
    uint64_t offset;
  };
  // Returns the current (seed, offset) and advances the offset by `increment`
  // (rounded up to a multiple of 4: each Philox call yields 4 numbers). Callers hold
  // the generator's mutex(), as for every at::Generator.
  PhiloxInputs reserve(uint64_t increment);

  static constexpr size_t kStateBytes = 2 * sizeof(uint64_t);
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  MetalxGeneratorImpl* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The default generator of a device (-1: the current device), created on first use.
const at::Generator& defaultGenerator(c10::DeviceIndex device_index);

// A new generator for a device (-1: the current device): torch.Generator("metalx").
at::Generator newGenerator(c10::DeviceIndex device_index);

}  // namespace metalx
