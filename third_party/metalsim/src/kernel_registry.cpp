// Collecting a translated library's kernels (see kernel_registry.h).
#include "kernel_registry.h"

#include "metalx/runtime/error.h"

namespace metalsim {

KernelSet::KernelSet(EntryFn entry, std::shared_ptr<void> keep_alive)
    : keep_alive_(std::move(keep_alive)) {
  std::string duplicate;
  kabi::Registrar r;
  r.api = &hostApi();
  r.context = this;
  r.add = [](kabi::Registrar* self, const kabi::KernelInfo* k) {
    auto* set = static_cast<KernelSet*>(self->context);
    auto [it, inserted] = set->kernels_.emplace(k->name, k);
    if (!inserted)
      throw metalx::rt::Error(metalx::rt::ErrorKind::Validation,
                              std::string("two kernels are named '") + k->name + "' (in " +
                                  it->second->source_name + " and " + k->source_name + ")");
  };
  entry(&r);
}

const kabi::KernelInfo* KernelSet::find(const std::string& name) const {
  auto it = kernels_.find(name);
  return it == kernels_.end() ? nullptr : it->second;
}

}  // namespace metalsim
