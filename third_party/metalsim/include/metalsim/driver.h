// The simulator as a driver of the metalx runtime interface.
#pragma once

#include <vector>

#include "metalx/runtime/device.h"

namespace metalsim {

// Opens the simulated devices (METALSIM_DEVICE_COUNT of them, default 1).
std::vector<metalx::rt::DevicePtr> openDevices();

}  // namespace metalsim
