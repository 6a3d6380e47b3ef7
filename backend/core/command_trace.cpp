// Device command tracing (see command_trace.h).
#include "core/command_trace.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace metalx::command_trace {
namespace {

std::atomic<bool> on{false};
std::mutex mutex;
std::condition_variable settled;
int64_t pending = 0;  // traced commands whose completion handler has not run (under mutex)
std::vector<TracedCommand>& commands() {
  static auto* v = new std::vector<TracedCommand>();  // leaked: completions may come during exit
  return *v;
}
std::vector<uint64_t>& correlations() {
  thread_local std::vector<uint64_t> stack;
  return stack;
}

}  // namespace

bool enabled() { return on.load(std::memory_order_relaxed); }

void start() {
  std::lock_guard<std::mutex> lock(mutex);
  commands().clear();
  on.store(true, std::memory_order_release);
}

void stop() { on.store(false, std::memory_order_release); }

std::vector<TracedCommand> take() {
  std::unique_lock<std::mutex> lock(mutex);
  // Bounded: a command buffer that never completes must not hang the profiler too.
  settled.wait_for(lock, std::chrono::seconds(30), [] { return pending == 0; });
  std::vector<TracedCommand> out;
  out.swap(commands());
  return out;
}

void expect() {
  std::lock_guard<std::mutex> lock(mutex);
  ++pending;
}

void record(TracedCommand command) {
  std::lock_guard<std::mutex> lock(mutex);
  commands().push_back(std::move(command));
  if (--pending == 0) settled.notify_all();
}

void discard() {
  std::lock_guard<std::mutex> lock(mutex);
  if (--pending == 0) settled.notify_all();
}

void pushCorrelation(uint64_t id) { correlations().push_back(id); }
void popCorrelation() {
  if (!correlations().empty()) correlations().pop_back();
}
uint64_t currentCorrelation() { return correlations().empty() ? 0 : correlations().back(); }

}  // namespace metalx::command_trace
