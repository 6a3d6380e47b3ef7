// Bounded caches of pipelines and run-time compiled libraries (see pipeline_cache.h).
#include "metalx/runtime/pipeline_cache.h"

#include "metalx/runtime/env.h"

#include <functional>

namespace metalx::rt {

PipelineCache::PipelineCache(Device& device)
    : device_(device),
      builtin_(device.builtinLibrary()),
      pipelines_(static_cast<size_t>(env::integer("METALX_PIPELINE_CACHE_SIZE", 512, 1))),
      libraries_(static_cast<size_t>(env::integer("METALX_LIBRARY_CACHE_SIZE", 64, 1))) {}

ComputePipelinePtr PipelineCache::builtin(const std::string& function_name) {
  return get(builtin_, function_name);
}

ComputePipelinePtr PipelineCache::get(const LibraryPtr& library,
                                      const std::string& function_name) {
  // The library's identity, not its address: a library evicted and compiled again
  // from the same source maps to the same pipelines.
  std::string key = library->identity() + '\n' + function_name;
  return pipelines_.getOrCreate(key,
                                [&] { return library->newComputePipeline(function_name); });
}

ComputePipelinePtr PipelineCache::get(const LibraryPtr& library, const std::string& function_name,
                                      const FunctionConstantValues& constants) {
  if (constants.empty()) return get(library, function_name);
  std::string key = library->identity() + '\n' + function_name + '\n' + functionConstantsKey(constants);
  return pipelines_.getOrCreate(key, [&] { return library->newComputePipeline(function_name, constants); });
}

LibraryPtr PipelineCache::compile(const std::string& source, const CompileOptions& options) {
  std::string key = options.language_version + (options.fast_math ? "|fast|" : "|safe|") +
                    options.source_name + '\n';
  for (const std::string& dir : options.include_dirs) key += "-I" + dir + '\n';
  key += source;
  return libraries_.getOrCreate(key, [&] { return device_.compileLibrary(source, options); });
}

void PipelineCache::clear() {
  pipelines_.clear();
  libraries_.clear();
}

void PipelineCache::setCapacities(size_t pipelines, size_t libraries) {
  pipelines_.setCapacity(pipelines);
  libraries_.setCapacity(libraries);
}

}  // namespace metalx::rt
