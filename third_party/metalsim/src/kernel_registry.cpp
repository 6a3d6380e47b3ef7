// Collecting a translated library's kernels (see kernel_registry.h).
#include "kernel_registry.h"

#include "metalx/runtime/error.h"

namespace metalsim {

KernelSet::KernelSet(EntryFn entry, std::shared_ptr<void> keep_alive)
    : keep_alive_(std::move(keep_alive)) {
  kabi::Registrar r;
  r.api = &hostApi();
  r.context = this;
  r.add = [](kabi::Registrar* self, const kabi::KernelInfo* k) { static_cast<KernelSet*>(self->context)->add(k); };
  entry(&r);
  for (auto& [name, info] : kernels_) static_tg_[info].store(0);  // fixed from here on
}

void KernelSet::add(const kabi::KernelInfo* k) {
  auto [it, inserted] = kernels_.emplace(k->name, k);
  if (!inserted)
    throw metalx::rt::Error(metalx::rt::ErrorKind::Validation,
                            std::string("two kernels are named '") + k->name + "' (in " +
                                it->second->source_name + " and " + k->source_name + ")");
}

std::shared_ptr<KernelSet> KernelSet::merged(const std::vector<std::shared_ptr<const KernelSet>>& parts) {
  std::shared_ptr<KernelSet> set(new KernelSet());
  bool checked = !parts.empty();
  for (const auto& part : parts) {
    for (const auto& [name, info] : part->all()) set->add(info);
    checked = checked && part->checked();
  }
  for (auto& [name, info] : set->kernels_) set->static_tg_[info].store(0);
  set->keep_alive_ = std::make_shared<std::vector<std::shared_ptr<const KernelSet>>>(parts);
  set->checked_ = checked;
  return set;
}

uint64_t KernelSet::staticThreadgroupMemory(const kabi::KernelInfo* kernel) const {
  auto it = static_tg_.find(kernel);
  return it == static_tg_.end() ? 0 : it->second.load(std::memory_order_relaxed);
}

void KernelSet::recordStaticThreadgroupMemory(const kabi::KernelInfo* kernel, uint64_t bytes) const {
  auto it = static_tg_.find(kernel);
  if (it == static_tg_.end()) return;
  uint64_t seen = it->second.load(std::memory_order_relaxed);
  while (bytes > seen && !it->second.compare_exchange_weak(seen, bytes)) {
  }
}

const kabi::KernelInfo* KernelSet::find(const std::string& name) const {
  auto it = kernels_.find(name);
  return it == kernels_.end() ? nullptr : it->second;
}

}  // namespace metalsim
