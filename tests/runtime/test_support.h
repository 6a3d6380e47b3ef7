// Shared helpers for the runtime tests: a device, buffers filled from vectors, test
// kernels compiled from tests/runtime/kernels, and checks for validation errors.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "metalx/runtime/runtime.h"

namespace metalx::rt::testing {

inline Device& dev(int index = 0) { return device(index); }

template <class T>
BufferPtr bufferFrom(const std::vector<T>& values, Device& d = dev()) {
  auto b = d.newBuffer(values.size() * sizeof(T));
  std::memcpy(b->contents(), values.data(), values.size() * sizeof(T));
  return b;
}

template <class T>
std::vector<T> read(const BufferPtr& b, size_t count, size_t byte_offset = 0) {
  std::vector<T> out(count);
  std::memcpy(out.data(), static_cast<const char*>(b->contents()) + byte_offset, count * sizeof(T));
  return out;
}

inline std::string readKernelSource(const std::string& file) {
  std::ifstream f(std::string(METALX_TEST_KERNEL_DIR) + "/" + file);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Compile options that only name the source (diagnostics say "<name>:line:col").
inline CompileOptions named(const std::string& name) {
  CompileOptions o;
  o.source_name = name;
  return o;
}

// A library compiled from tests/runtime/kernels/<file>, once per process. Tests call
// it from several threads at once, hence the lock.
inline LibraryPtr testLibrary(const std::string& file, Device& d = dev()) {
  static std::mutex mutex;
  static std::map<std::pair<Device*, std::string>, LibraryPtr> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(&d, file);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto lib = d.compileLibrary(readKernelSource(file), named(file));
  cache[key] = lib;
  return lib;
}

// A fixture with a fresh queue and the kernels of tests/runtime/kernels/<File>.
template <const char* File>
class KernelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    queue = dev().newCommandQueue();
    lib = testLibrary(File);
  }
  ComputePipelinePtr pipeline(const std::string& name) { return lib->newComputePipeline(name); }
  CommandQueuePtr queue;
  LibraryPtr lib;
};

// Runs fn(encoder) in a fresh command buffer, commits and waits; returns it.
template <class Fn>
CommandBufferPtr runCompute(CommandQueue& q, Fn&& fn) {
  auto cb = q.commandBuffer();
  auto enc = cb->computeEncoder();
  fn(*enc);
  enc->endEncoding();
  cb->commit();
  cb->waitUntilCompleted();
  return cb;
}

// Expects `statement` to throw metalx::rt::Error of `kind` whose message contains `text`.
#define EXPECT_RT_ERROR(statement, expected_kind, text)                                       \
  do {                                                                               \
    try {                                                                            \
      statement;                                                                     \
      ADD_FAILURE() << "expected an error containing \"" << (text) << "\"";          \
    } catch (const ::metalx::rt::Error& e) {                                         \
      EXPECT_EQ(e.kind(), (expected_kind)) << e.what();                                       \
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();    \
    }                                                                                \
  } while (0)

}  // namespace metalx::rt::testing
