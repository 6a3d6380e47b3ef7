// Driver selection: which implementation of the interface this process uses.
#include "metalx/runtime/driver.h"

#include "metalx/runtime/env.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "metalx/runtime/error.h"

#if METALX_HAVE_SIM
#include "metalsim/driver.h"
#endif
#if METALX_HAVE_METAL
namespace metalx::rt::metal {
std::vector<DevicePtr> openDevices();  // backend/runtime/metal/driver.mm
}
#endif

namespace metalx::rt {
namespace {

struct Selection {
  std::string name;
  std::vector<DevicePtr> devices;
};

Selection select() {
  const std::string want = env::choice("METALX_DRIVER", "", {"metal", "sim"});
#if METALX_HAVE_METAL
  if (want.empty() || want == "metal") {
    auto found = metal::openDevices();
    if (!found.empty() || want == "metal") return {"metal", std::move(found)};
  }
#endif
#if METALX_HAVE_SIM
  if (want.empty() || want == "sim") return {"sim", metalsim::openDevices()};
#endif
  throw Error(ErrorKind::NotFound,
              "METALX_DRIVER='" + want + "' is not built into this metalx (built: " +
                  [] {
                    std::string s;
                    for (auto& d : availableDrivers()) s += (s.empty() ? "" : ", ") + d;
                    return s;
                  }() +
                  ")");
}

void markForkedChild() { detail::forked_child.store(true, std::memory_order_relaxed); }

Selection& selection() {
  static Selection chosen = [] {
    Selection s = select();
    // From now on a fork()ed child inherits devices whose threads it does not have.
    pthread_atfork(nullptr, nullptr, &markForkedChild);
    return s;
  }();
  return chosen;
}

}  // namespace

namespace detail {
std::atomic<bool> forked_child{false};
}  // namespace detail

void throwForkedChild() {
  throw Error(ErrorKind::Unsupported,
              "metalx cannot be used in a forked subprocess: the parent process had initialised it, and its "
              "device threads do not exist in the child. Use the 'spawn' start method "
              "(multiprocessing.set_start_method('spawn') or DataLoader(multiprocessing_context='spawn')), "
              "or create metalx tensors only after the fork");
}

const std::string& driverName() {
  checkNotForkedChild();
  return selection().name;
}
const std::vector<DevicePtr>& devices() {
  checkNotForkedChild();
  return selection().devices;
}

Device& device(int index) {
  auto& all = devices();
  if (index < 0 || index >= static_cast<int>(all.size()))
    throw Error(ErrorKind::NotFound,
                "no metalx device " + std::to_string(index) + " (the " + driverName() +
                    " driver has " + std::to_string(all.size()) + " device" +
                    (all.size() == 1 ? "" : "s") + ")");
  return *all[index];
}

std::vector<std::string> availableDrivers() {
  std::vector<std::string> names;
#if METALX_HAVE_METAL
  names.push_back("metal");
#endif
#if METALX_HAVE_SIM
  names.push_back("sim");
#endif
  return names;
}

size_t hostPageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace metalx::rt
