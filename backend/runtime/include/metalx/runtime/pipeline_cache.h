// Compute pipelines and run-time compiled libraries, created once and reused.
//
// Shared by every driver: on Metal a pipeline costs a compile-and-link, in the
// simulator a lookup; either way a dispatch must not pay it. Both caches are bounded
// (METALX_PIPELINE_CACHE_SIZE, METALX_LIBRARY_CACHE_SIZE) and releasable.
#pragma once

#include <memory>
#include <string>

#include "metalx/runtime/bounded_cache.h"
#include "metalx/runtime/device.h"

namespace metalx::rt {

class PipelineCache {
 public:
  explicit PipelineCache(Device& device);

  // The pipeline of `function_name` in the device's built-in library.
  ComputePipelinePtr builtin(const std::string& function_name);
  ComputePipelinePtr get(const LibraryPtr& library, const std::string& function_name);
  // One pipeline per (library, function, function constant values).
  ComputePipelinePtr get(const LibraryPtr& library, const std::string& function_name,
                         const FunctionConstantValues& constants);
  // A library compiled from `source`, reused for the same source and options.
  LibraryPtr compile(const std::string& source, const CompileOptions& options = {});

  // The device the pipelines are for (launchers size their work by its info()).
  Device& device() const { return device_; }

  void clear();
  CacheStats pipelineStats() const { return pipelines_.stats(); }
  CacheStats libraryStats() const { return libraries_.stats(); }
  void setCapacities(size_t pipelines, size_t libraries);

 private:
  Device& device_;
  LibraryPtr builtin_;
  BoundedCache<std::string, ComputePipelinePtr> pipelines_;
  BoundedCache<std::string, LibraryPtr> libraries_;
};

}  // namespace metalx::rt
