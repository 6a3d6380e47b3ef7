// The Metal driver's entry point: the Macs's GPUs as metalx devices (driver.cpp calls
// this when the build has the Metal driver).
#include "metal_objects.h"

namespace metalx::rt::metal {

std::vector<DevicePtr> openDevices() {
  std::vector<DevicePtr> devices;
  @autoreleasepool {
    // The system default device (the one that drives the display, or the only one on
    // Apple silicon) is device 0; any others follow in the order Metal lists them.
    id<MTLDevice> preferred = MTLCreateSystemDefaultDevice();
    NSArray<id<MTLDevice>>* all = MTLCopyAllDevices();
    if (preferred) devices.push_back(std::make_shared<MetalDevice>(0, preferred));
    for (id<MTLDevice> d in all) {
      if (preferred && [d registryID] == [preferred registryID]) continue;
      devices.push_back(std::make_shared<MetalDevice>(static_cast<int>(devices.size()), d));
    }
  }
  // None at all (some virtual machines have no Metal device): driver.cpp falls back to
  // the simulator if it was built, or reports no devices when METALX_DRIVER=metal.
  return devices;
}

}  // namespace metalx::rt::metal
