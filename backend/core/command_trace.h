// Tracing of device commands for profilers: which kernels, copies and fills ran, on
// which device and stream, when (on the runtime's clock) and for which host op.
//
// While tracing is on, a stream commits every command in a command buffer of its own,
// so that command buffer's GPU start and end times are the command's (the runtime
// times command buffers, not single dispatches). That costs batching, as profiling
// costs on any GPU; off (the default), tracing costs one atomic load per command.
//
// The correlation id is the host op a command belongs to: the profiler pushes the id
// of each op it records (per thread), and commands encoded meanwhile carry it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace metalx {

enum class CommandKind { Kernel, Copy, Fill };

struct TracedCommand {
  std::string name;  // kernel function name(s), or "copy"/"fill"
  CommandKind kind;
  int device;
  int64_t stream;
  double gpu_start_s, gpu_end_s;  // runtime clock
  double host_seen_s;             // host clock (system clock, seconds since the epoch) when its completion was seen
  uint64_t correlation;           // 0: none
  uint64_t bytes;                 // copies and fills
};

namespace command_trace {

bool enabled();
// Starts a new trace (dropping anything not taken); tracing sessions do not nest.
void start();
void stop();
// The commands completed since start(), oldest first; clears them. Waits for the
// completion handlers of traced commands still running: a stream's synchronize() can
// return once its own handler has run, before a later handler has recorded.
std::vector<TracedCommand> take();
// Streams call expect() when they add a traced command's completion handler, and the
// handler calls record() (completed) or discard() (failed).
void expect();
void record(TracedCommand command);
void discard();

void pushCorrelation(uint64_t id);
void popCorrelation();
uint64_t currentCorrelation();

}  // namespace command_trace
}  // namespace metalx
