// The kernels of one translated library: the built-in one, or one compiled at run time.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "metalsim/checked_abi.h"
#include "metalsim/kernel_abi.h"

namespace metalsim {

// The table of simulator functions that translated kernels call (executor.cpp).
const kabi::HostApi& hostApi();
// The table run-time compiled kernels with validation or the watchdog get (executor.cpp).
const checked_abi::Api& checkedApi();

class KernelSet {
 public:
  using EntryFn = void (*)(kabi::Registrar*);
  // Calls a library's registration function and collects its kernels. Throws
  // Error(Validation) when two kernels share a name. `keep_alive` holds whatever
  // must outlive the kernels (the handle of a dlopen'ed module).
  KernelSet(EntryFn entry, std::shared_ptr<void> keep_alive);
  // One set with the kernels of all `parts` (each compiled from its own source), which
  // it keeps alive. Throws Error(Validation) when two parts define the same name.
  static std::shared_ptr<KernelSet> merged(const std::vector<std::shared_ptr<const KernelSet>>& parts);

  const kabi::KernelInfo* find(const std::string& name) const;
  const std::map<std::string, const kabi::KernelInfo*>& all() const { return kernels_; }

  // Bytes of threadgroup variables `kernel` declares, as measured when it ran (0 until
  // then). Recorded by the executor; read by pipelines and dispatch validation.
  uint64_t staticThreadgroupMemory(const kabi::KernelInfo* kernel) const;
  void recordStaticThreadgroupMemory(const kabi::KernelInfo* kernel, uint64_t bytes) const;

  // Whether the kernels were compiled with shader validation or loop checks (their
  // library exported metalsim_checked_entry and got checkedApi()).
  bool checked() const { return checked_; }
  void setChecked() { checked_ = true; }

 private:
  std::map<std::string, const kabi::KernelInfo*> kernels_;
  mutable std::map<const kabi::KernelInfo*, std::atomic<uint64_t>> static_tg_;
  KernelSet() = default;
  void add(const kabi::KernelInfo* kernel);

  std::shared_ptr<void> keep_alive_;
  bool checked_ = false;
};

}  // namespace metalsim
