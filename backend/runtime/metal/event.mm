// MTLSharedEvent as a metalx event (see metal_objects.h): host reads, signals and
// waits, and MTLSharedEventListener callbacks for notify().
#include "metal_objects.h"

namespace metalx::rt::metal {

MetalEvent::MetalEvent(MetalDevice& device, id<MTLSharedEvent> event)
    : device_(device), event_(event) {}

Device& MetalEvent::device() { return device_; }

uint64_t MetalEvent::signaledValue() const { return [event_ signaledValue]; }

void MetalEvent::signal(uint64_t value) {
  // Metal's setter would also move the value backwards; the interface only moves it
  // forwards, so a smaller value is ignored.
  std::lock_guard<std::mutex> lock(signal_mutex_);
  if (value <= [event_ signaledValue]) return;
  [event_ setSignaledValue:value];
}

bool MetalEvent::waitUntilSignaled(uint64_t value, std::chrono::milliseconds timeout) {
  if ([event_ signaledValue] >= value) return true;
  const long long ms = timeout.count() < 0 ? 0 : timeout.count();
  const uint64_t capped = ms > 0xffffffffll ? 0xffffffffull : static_cast<uint64_t>(ms);
  return [event_ waitUntilSignaledValue:value timeoutMS:capped];
}

void MetalEvent::notify(uint64_t value, std::function<void()> fn) {
  auto owned = std::make_shared<std::function<void()>>(std::move(fn));
  auto run = ^{
    try {
      (*owned)();
    } catch (...) {
      // Nowhere to report it; keep serving other listeners.
    }
  };
  // Runs on the device's listener queue, never on the caller's thread. A value already
  // reached is posted there directly rather than relying on Metal to fire a listener
  // registered late.
  MTLSharedEventListener* listener = device_.listener();
  if ([event_ signaledValue] >= value) {
    dispatch_async([listener dispatchQueue], run);
    return;
  }
  [event_ notifyListener:listener
                 atValue:value
                   block:^(id<MTLSharedEvent> event, uint64_t reached) {
                     (void)event;
                     (void)reached;
                     run();
                   }];
}

}  // namespace metalx::rt::metal
