#include "generator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <deque>
#include <mutex>

#include "device.h"

namespace metalx {
namespace {

// torch's documented default seed, so an unseeded metalx generator starts where a
// CPU or CUDA one does.
constexpr uint64_t kDefaultSeed = 67280421310721ULL;

void storeLittleEndian(uint64_t value, uint8_t* out) {
  for (size_t i = 0; i < sizeof(value); ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t loadLittleEndian(const uint8_t* in) {
  uint64_t value = 0;
  for (size_t i = 0; i < sizeof(value); ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

c10::DispatchKeySet keySet() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

}  // namespace

MetalxGeneratorImpl::MetalxGeneratorImpl(c10::DeviceIndex device_index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device_index), keySet()),
      seed_(kDefaultSeed) {}

void MetalxGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t MetalxGeneratorImpl::current_seed() const { return seed_; }

uint64_t MetalxGeneratorImpl::seed() {
  const uint64_t fresh = c10::detail::getNonDeterministicRandom();
  set_current_seed(fresh);
  return fresh;
}

void MetalxGeneratorImpl::set_offset(uint64_t offset) {
  TORCH_CHECK(offset % 4 == 0, "metalx generator offset must be a multiple of 4, got ", offset);
  offset_ = offset;
}

uint64_t MetalxGeneratorImpl::get_offset() const { return offset_; }

c10::intrusive_ptr<c10::TensorImpl> MetalxGeneratorImpl::get_state() const {
  auto state = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(c10::Storage::use_byte_size_t(), kStateBytes, c10::GetCPUAllocator(),
                   /*resizable=*/false),
      c10::DispatchKeySet(c10::DispatchKey::CPU), caffe2::TypeMeta::Make<uint8_t>());
  state->set_sizes_contiguous({static_cast<int64_t>(kStateBytes)});
  auto* bytes = static_cast<uint8_t*>(state->mutable_data());
  storeLittleEndian(seed_, bytes);
  storeLittleEndian(offset_, bytes + sizeof(uint64_t));
  return state;
}

void MetalxGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.device().is_cpu() && new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "metalx RNG state must be a CPU torch.uint8 tensor, got ", new_state.dtype(),
              " on ", new_state.device());
  TORCH_CHECK(new_state.numel() == static_cast<int64_t>(kStateBytes) &&
                  new_state.is_contiguous(),
              "metalx RNG state must be a contiguous tensor of ", kStateBytes,
              " bytes (seed, offset), got ", new_state.numel(), " elements");
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  const uint64_t offset = loadLittleEndian(bytes + sizeof(uint64_t));
  set_offset(offset);
  seed_ = loadLittleEndian(bytes);
}

MetalxGeneratorImpl::PhiloxInputs MetalxGeneratorImpl::reserve(uint64_t increment) {
  const PhiloxInputs inputs{seed_, offset_};
  offset_ += ((increment + 3) / 4) * 4;
  return inputs;
}

MetalxGeneratorImpl* MetalxGeneratorImpl::clone_impl() const {
  auto* copy = new MetalxGeneratorImpl(device().index());
  copy->seed_ = seed_;
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& defaultGenerator(c10::DeviceIndex device_index) {
  const c10::DeviceIndex index = resolveDeviceIndex(device_index);
  checkDeviceIndex(index);
  // One slot per device, created when first asked for. A deque keeps references to
  // existing generators valid while the table grows.
  static std::mutex mutex;
  static std::deque<at::Generator> generators;
  std::lock_guard<std::mutex> lock(mutex);
  while (generators.size() <= static_cast<size_t>(index))
    generators.emplace_back(
        at::make_generator<MetalxGeneratorImpl>(static_cast<c10::DeviceIndex>(generators.size())));
  return generators[index];
}

at::Generator newGenerator(c10::DeviceIndex device_index) {
  const c10::DeviceIndex index = resolveDeviceIndex(device_index);
  checkDeviceIndex(index);
  return at::make_generator<MetalxGeneratorImpl>(index);
}

}  // namespace metalx
