// Device command tracing (see command_trace.h).
#include "core/command_trace.h"

#include <atomic>
#include <mutex>

namespace metalx::command_trace {
namespace {

std::atomic<bool> on{false};
std::mutex mutex;
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
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<TracedCommand> out;
  out.swap(commands());
  return out;
}

void record(TracedCommand command) {
  std::lock_guard<std::mutex> lock(mutex);
  commands().push_back(std::move(command));
}

void pushCorrelation(uint64_t id) { correlations().push_back(id); }
void popCorrelation() {
  if (!correlations().empty()) correlations().pop_back();
}
uint64_t currentCorrelation() { return correlations().empty() ? 0 : correlations().back(); }

}  // namespace metalx::command_trace
