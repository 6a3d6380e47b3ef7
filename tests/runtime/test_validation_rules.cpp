// The shared validation rules (metalx/runtime/validation.h) word each error exactly as
// the driver in use does: the Metal driver calls them, the simulator has its own copy
// of the same rules, and users must see one message whichever runs.
#include "metalx/runtime/validation.h"
#include "test_support.h"

namespace metalx::rt::testing {
namespace {

namespace v = metalx::rt::validation;

// The message of the Error `fn` throws ("" if it throws none).
template <class Fn>
std::string messageOf(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Runs `driver` and `rule`, both expected to fail the same way.
template <class A, class B>
void expectSameError(A&& driver, B&& rule) {
  std::string from_driver = messageOf(driver), from_rule = messageOf(rule);
  EXPECT_FALSE(from_driver.empty()) << "the driver accepted it";
  EXPECT_EQ(from_driver, from_rule);
}

TEST(ValidationRules, DeviceRulesWordErrorsAsTheDriver) {
  expectSameError([] { dev().newBuffer(0); }, [] { v::newBufferLength(0, 1); });
  const uint64_t max = dev().info().max_buffer_length;
  if (max < std::numeric_limits<size_t>::max())
    expectSameError([&] { dev().newBuffer(max + 1); }, [&] { v::newBufferLength(max + 1, max); });
  alignas(64) static char unaligned[64];
  const size_t page = hostPageSize();
  expectSameError([&] { dev().wrapHostMemory(unaligned + 1, page, {}); },
                  [&] { v::hostMemory(unaligned + 1, page, page); });
}

TEST(ValidationRules, BlitRulesWordErrorsAsTheDriver) {
  auto q = dev().newCommandQueue();
  auto a = dev().newBuffer(64), b = dev().newBuffer(64);
  auto cb = q->commandBuffer();
  cb->setLabel("rules");
  auto blit = cb->blitEncoder();
  expectSameError([&] { blit->copyBuffer(a, 2, b, 0, 4); }, [] { v::copy(2, 64, 0, 64, 4, false); });
  expectSameError([&] { blit->copyBuffer(a, 0, b, 0, 6); }, [] { v::copy(0, 64, 0, 64, 6, false); });
  expectSameError([&] { blit->copyBuffer(a, 60, b, 0, 8); }, [] { v::copy(60, 64, 0, 64, 8, false); });
  expectSameError([&] { blit->copyBuffer(a, 0, a, 4, 8); }, [] { v::copy(0, 64, 4, 64, 8, true); });
  expectSameError([&] { blit->fillBuffer(a, 0, 0, 1); }, [] { v::fill(0, 0, 64); });
  expectSameError([&] { blit->fillBuffer(a, 4, 64, 1); }, [] { v::fill(4, 64, 64); });
  blit->endEncoding();
  v::CommandBufferRules rules;
  rules.label = "rules";
  const std::string where = v::encoderWhere("blit", "", rules.describe());
  expectSameError([&] { blit->fillBuffer(a, 0, 4, 1); },
                  [&] { v::requireOpen(true, "fillBuffer", where); });
}

TEST(ValidationRules, CommandBufferRulesWordErrorsAsTheDriver) {
  auto q = dev().newCommandQueue();
  auto cb = q->commandBuffer();
  cb->setLabel("cb");
  v::CommandBufferRules rules;
  rules.label = "cb";
  expectSameError([&] { cb->waitUntilCompleted(); }, [&] { rules.beforeWait(false); });
  auto enc = cb->computeEncoder();
  rules.opened(enc.get(), "compute");
  expectSameError([&] { cb->blitEncoder(); }, [&] { rules.beforeEncoder("blitEncoder"); });
  expectSameError([&] { cb->encodeSignal(dev().newEvent(), 1); },
                  [&] { rules.beforeEventCommand("encodeSignal", "an event signal"); });
  expectSameError([&] { cb->commit(); }, [&] { rules.beforeCommit(); });
  enc->endEncoding();
  cb->commit();
  rules.ended(enc.get());
  rules.committed = true;
  expectSameError([&] { cb->computeEncoder(); }, [&] { rules.beforeEncoder("computeEncoder"); });
  cb->waitUntilCompleted();
}

TEST(ValidationRules, ComputeRulesWordErrorsAsTheDriver) {
  auto q = dev().newCommandQueue();
  auto cb = q->commandBuffer();
  auto enc = cb->computeEncoder();
  auto buf = dev().newBuffer(64);
  const std::string where = v::encoderWhere("compute", "", "command buffer");
  expectSameError([&] { enc->setBuffer(buf, 0, 31); }, [] { v::bindingIndex(31, 31, "setBuffer"); });
  expectSameError([&] { enc->setBuffer(buf, 65, 0); }, [] { v::bufferOffset(65, 64, 0); });
  char bytes[8] = {};
  expectSameError([&] { enc->setBytes(bytes, 0, 0); }, [] { v::inlineBytes(0); });
  const size_t limit = dev().info().max_threadgroup_memory_length;
  expectSameError([&] { enc->setThreadgroupMemoryLength(8, 0); },
                  [&] { v::threadgroupMemoryLength(8, limit); });
  expectSameError([&] { enc->dispatchThreads({1, 1, 1}, {1, 1, 1}); },
                  [&] { v::dispatch(nullptr, {1, 1, 1}, {1, 1, 1}, {}, limit, where); });
  auto fill = dev().builtinLibrary()->newComputePipeline("fill_dense_int");
  enc->setComputePipeline(fill);
  v::Bindings none;
  expectSameError([&] { enc->dispatchThreads({64, 1, 1}, {0, 1, 1}); },
                  [&] { v::dispatch(fill.get(), {64, 1, 1}, {0, 1, 1}, none, limit, where); });
  expectSameError([&] { enc->dispatchThreads({64, 1, 1}, {64, 1, 1}); },
                  [&] { v::dispatch(fill.get(), {64, 1, 1}, {64, 1, 1}, none, limit, where); });
  enc->endEncoding();
}

TEST(ValidationRules, UnknownKernelAndRenamedDiagnostics) {
  auto lib = dev().builtinLibrary();
  const std::string from_driver = messageOf([&] { lib->newComputePipeline("no_such_kernel"); });
  EXPECT_EQ(from_driver.rfind("no kernel function 'no_such_kernel' in library builtin (it has: ", 0), 0u)
      << from_driver;
  EXPECT_EQ(v::unknownFunction("k", "L", {}), "no kernel function 'k' in library L (it has: none)");
  EXPECT_EQ(v::renameSource("program_source:5:3: error: x\nprogram_source:6:1: note", "program_source",
                            "a.metal"),
            "a.metal:5:3: error: x\na.metal:6:1: note");
}

}  // namespace
}  // namespace metalx::rt::testing
