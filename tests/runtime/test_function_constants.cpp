// Function constants through the runtime interface (any driver): a pipeline per value
// set, made once by PipelineCache; values the source does not declare, or of another
// type, are validation errors; parameters conditional on a false constant are not
// arguments of the pipeline.
#include <cstring>

#include "metalx/runtime/pipeline_cache.h"
#include "test_support.h"

namespace metalx::rt::testing {
namespace {

const char* kSource =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "constant int add [[function_constant(0)]];\n"
    "constant bool use_second [[function_constant(1)]];\n"
    "kernel void k(device int* out [[buffer(0)]],\n"
    "              const device int* second [[buffer(1), function_constant(use_second)]],\n"
    "              uint i [[thread_position_in_grid]]) {\n"
    "  out[i] = out[i] + add + (use_second ? second[i] : 0);\n"
    "}\n";

FunctionConstantValue intValue(int64_t index, int32_t v) {
  FunctionConstantValue c;
  c.index = index;
  c.type = FunctionConstantValue::Type::Int;
  c.bytes.assign(reinterpret_cast<const char*>(&v), sizeof v);
  return c;
}

FunctionConstantValue boolValue(const std::string& name, bool v) {
  FunctionConstantValue c;
  c.name = name;
  c.type = FunctionConstantValue::Type::Bool;
  c.bytes.assign(1, v ? 1 : 0);
  return c;
}

LibraryPtr library() {
  CompileOptions o;
  o.source_name = "constants.metal";
  return dev().compileLibrary(kSource, o);
}

std::vector<int> run(const ComputePipelinePtr& p, std::vector<int> out, const std::vector<int>& second) {
  auto q = dev().newCommandQueue();
  auto out_buf = bufferFrom(out);
  auto second_buf = bufferFrom(second);
  bool bind_second = p->arguments().size() == 2;
  auto cb = runCompute(*q, [&](ComputeEncoder& e) {
    e.setComputePipeline(p);
    e.setBuffer(out_buf, 0, 0);
    if (bind_second) e.setBuffer(second_buf, 0, 1);
    e.dispatchThreads({out.size(), 1, 1}, {out.size(), 1, 1});
  });
  EXPECT_EQ(cb->status(), CommandBufferStatus::Completed) << cb->error();
  return read<int>(out_buf, out.size());
}

TEST(FunctionConstants, EachValueSetIsItsOwnCachedPipeline) {
  PipelineCache cache(dev());
  auto lib = library();
  auto plus5 = cache.get(lib, "k", {intValue(0, 5), boolValue("use_second", false)});
  auto again = cache.get(lib, "k", {boolValue("use_second", false), intValue(0, 5)});  // any order
  EXPECT_EQ(plus5, again);
  auto with_second = cache.get(lib, "k", {intValue(0, -1), boolValue("use_second", true)});
  EXPECT_NE(plus5, with_second);
  EXPECT_EQ(cache.pipelineStats().misses, 2u);
  EXPECT_EQ(cache.pipelineStats().hits, 1u);

  EXPECT_EQ(plus5->arguments().size(), 1u);  // `second` is absent when use_second is false
  ASSERT_EQ(with_second->arguments().size(), 2u);
  EXPECT_EQ(with_second->arguments()[1].name, "second");
  EXPECT_EQ(run(plus5, {1, 2, 3}, {10, 20, 30}), (std::vector<int>{6, 7, 8}));
  EXPECT_EQ(run(with_second, {1, 2, 3}, {10, 20, 30}), (std::vector<int>{10, 21, 32}));
}

TEST(FunctionConstants, ValuesTheSourceDoesNotDeclareAreValidationErrors) {
  auto lib = library();
  FunctionConstantValue wrong_type = intValue(1, 1);  // use_second is a bool
  EXPECT_RT_ERROR(lib->newComputePipeline("k", {wrong_type}), ErrorKind::Validation,
                  "function constant 'use_second' is declared bool but given a int value");
  EXPECT_RT_ERROR(lib->newComputePipeline("k", {intValue(7, 1)}), ErrorKind::Validation,
                  "declares no function constant index 7 (it declares int add [[function_constant(0)]], "
                  "bool use_second [[function_constant(1)]])");
  EXPECT_RT_ERROR(lib->newComputePipeline("k", {intValue(0, 1), intValue(0, 2)}), ErrorKind::Validation,
                  "function constant 'add' is given two values");
  FunctionConstantValue short_bytes = intValue(0, 1);
  short_bytes.bytes.resize(2);
  EXPECT_RT_ERROR(lib->newComputePipeline("k", {short_bytes}), ErrorKind::Validation,
                  "a int value has 4 bytes, got 2");
  EXPECT_RT_ERROR(lib->newComputePipeline("nope", {intValue(0, 1)}), ErrorKind::NotFound, "nope");
}

TEST(FunctionConstants, KeyIgnoresOrderButNotValues) {
  EXPECT_EQ(functionConstantsKey({intValue(0, 1), boolValue("b", true)}),
            functionConstantsKey({boolValue("b", true), intValue(0, 1)}));
  EXPECT_NE(functionConstantsKey({intValue(0, 1)}), functionConstantsKey({intValue(0, 2)}));
  EXPECT_NE(functionConstantsKey({intValue(0, 1)}), functionConstantsKey({intValue(1, 1)}));
}

}  // namespace
}  // namespace metalx::rt::testing
