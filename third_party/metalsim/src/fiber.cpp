// Fibers (see fiber.h). On x86-64 a small assembly routine switches stacks; elsewhere
// ucontext does (slower: it saves the signal mask with a system call).
#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>
#include <stdexcept>

#include "config.h"

#if defined(__SANITIZE_ADDRESS__)
#define METALSIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define METALSIM_ASAN 1
#endif
#endif
#if METALSIM_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && !defined(METALSIM_FIBER_UCONTEXT)
#define METALSIM_FIBER_ASM 1
extern "C" void metalsim_fiber_switch(void** save_sp, void* load_sp);
extern "C" void metalsim_fiber_trampoline();
// Saves the callee-saved registers on the current stack, stores the stack pointer in
// *save_sp, loads load_sp and restores the registers saved there. A new fiber's stack
// is laid out so that the first switch "returns" into the trampoline, which calls the
// entry function (r13) with its argument (r12).
asm(R"(
  .text
  .globl metalsim_fiber_switch
  .hidden metalsim_fiber_switch
  .type metalsim_fiber_switch,@function
metalsim_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size metalsim_fiber_switch,.-metalsim_fiber_switch

  .globl metalsim_fiber_trampoline
  .hidden metalsim_fiber_trampoline
  .type metalsim_fiber_trampoline,@function
metalsim_fiber_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size metalsim_fiber_trampoline,.-metalsim_fiber_trampoline
  .section .note.GNU-stack,"",@progbits
  .text
)");
#else
#include <ucontext.h>
#endif

namespace metalsim {

#if !METALSIM_FIBER_ASM
struct Fiber::Impl {
  ucontext_t fiber, caller;
};
#endif

size_t fiberStackSpan() {
  static const size_t span = [] {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t need = (config().fiber_stack_bytes + page - 1) / page * page + page;
    size_t s = page;
    while (s < need) s <<= 1;
    return s;
  }();
  return span;
}

Fiber::Fiber() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t span = fiberStackSpan();
  // Map twice the span and keep the aligned span inside it.
  void* raw = mmap(nullptr, 2 * span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + span - 1) & ~(span - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  if (begin + 2 * span > aligned + span) munmap(reinterpret_cast<void*>(aligned + span), begin + 2 * span - aligned - span);
  stack_ = reinterpret_cast<void*>(aligned);
  mapped_ = span;
  // A guard page below the stack turns an overflow into a fault at the overflow, not
  // silent corruption of a neighbouring fiber.
  mprotect(stack_, page, PROT_NONE);
#if !METALSIM_FIBER_ASM
  impl_ = new Impl;
#endif
}

Fiber::~Fiber() {
  munmap(stack_, mapped_);
#if !METALSIM_FIBER_ASM
  delete impl_;
#endif
}

namespace {
size_t pageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
}  // namespace

kabi::LaneHeader* Fiber::header() const {
  return reinterpret_cast<kabi::LaneHeader*>(static_cast<char*>(stack_) + mapped_ - kabi::kLaneHeaderBytes);
}

void Fiber::reset(Entry entry, void* arg) {
  char* bottom = static_cast<char*>(stack_) + pageSize();
  char* top = static_cast<char*>(stack_) + mapped_ - kabi::kLaneHeaderBytes;
#if METALSIM_FIBER_ASM
  auto* sp = reinterpret_cast<uintptr_t*>(reinterpret_cast<uintptr_t>(top) & ~uintptr_t(15));
  // After the six pops and the ret, %rsp is 16-byte aligned, so the trampoline's call
  // enters the function with the alignment the ABI requires.
  *--sp = reinterpret_cast<uintptr_t>(&metalsim_fiber_trampoline);  // ret target
  *--sp = 0;                                   // rbp
  *--sp = 0;                                   // rbx
  *--sp = reinterpret_cast<uintptr_t>(arg);    // r12
  *--sp = reinterpret_cast<uintptr_t>(entry);  // r13
  *--sp = 0;                                   // r14
  *--sp = 0;                                   // r15
  sp_ = sp;
#else
  getcontext(&impl_->fiber);
  impl_->fiber.uc_stack.ss_sp = bottom;
  impl_->fiber.uc_stack.ss_size = static_cast<size_t>(top - bottom);
  impl_->fiber.uc_link = nullptr;
  // makecontext passes int arguments only: split the pointers into halves.
  auto e = reinterpret_cast<uintptr_t>(entry), a = reinterpret_cast<uintptr_t>(arg);
  makecontext(&impl_->fiber, reinterpret_cast<void (*)()>(+[](unsigned eh, unsigned el, unsigned ah, unsigned al) {
                auto fn = reinterpret_cast<Entry>((uintptr_t(eh) << 32) | el);
                fn(reinterpret_cast<void*>((uintptr_t(ah) << 32) | al));
              }),
              4, unsigned(e >> 32), unsigned(e), unsigned(a >> 32), unsigned(a));
#endif
  (void)bottom;
}

void Fiber::resume() {
#if METALSIM_ASAN
  __sanitizer_start_switch_fiber(&fake_stack_, static_cast<char*>(stack_) + pageSize(), mapped_ - pageSize());
#endif
#if METALSIM_FIBER_ASM
  metalsim_fiber_switch(&caller_sp_, sp_);
#else
  swapcontext(&impl_->caller, &impl_->fiber);
#endif
#if METALSIM_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_, nullptr, nullptr);
#endif
}

void Fiber::suspend() {
#if METALSIM_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, caller_bottom_, caller_size_);
#endif
#if METALSIM_FIBER_ASM
  metalsim_fiber_switch(&sp_, caller_sp_);
#else
  swapcontext(&impl_->fiber, &impl_->caller);
#endif
#if METALSIM_ASAN
  __sanitizer_finish_switch_fiber(fake, &caller_bottom_, &caller_size_);
#endif
}

void Fiber::started() {
#if METALSIM_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &caller_bottom_, &caller_size_);
#endif
}

FiberPool::~FiberPool() {
  for (Fiber* f : fibers_) delete f;
}

Fiber& FiberPool::get(size_t i) {
  while (fibers_.size() <= i) fibers_.push_back(new Fiber());
  return *fibers_[i];
}

}  // namespace metalsim
