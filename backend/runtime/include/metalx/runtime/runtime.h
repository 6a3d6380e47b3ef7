// The metalx runtime interface: everything backend/ may use to talk to a GPU.
//
// Narrow on purpose: devices, shared buffers, queues and command buffers, compute and
// blit encoders, libraries and pipelines, events. Two drivers implement it: Apple's
// Metal (backend/runtime/metal/, macOS only) and the simulator (third_party/metalsim/)
// that runs the same kernels on CPU threads with Metal's execution model and rules.
#pragma once

#include "metalx/runtime/buffer.h"
#include "metalx/runtime/command.h"
#include "metalx/runtime/device.h"
#include "metalx/runtime/driver.h"
#include "metalx/runtime/error.h"
#include "metalx/runtime/event.h"
#include "metalx/runtime/library.h"
#include "metalx/runtime/pipeline_cache.h"
#include "metalx/runtime/types.h"
