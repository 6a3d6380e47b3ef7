// How a native op runs torch's own meta function, so that its shapes, dtypes, out= and
// in-place rules are exactly CPU's and CUDA's.
//
// A structured op in torch is a meta class (at::meta::structured_<op>: the checks, the
// output's size and dtype, and for TensorIterator ops the iterator itself) plus a
// kernel. CPU and CUDA get a wrapper per variant generated; metalx writes them once here:
//   FunctionalOp  allocates the outputs on the device as the meta function asks;
//   OutOp         checks and resizes the caller's out= tensors (a temporary "proxy" when
//                 their strides differ from what the op must produce, copied back after);
//   InplaceOp     uses self, checking that the op keeps its size and dtype.
// The op then runs its kernel on the built meta object (runNative), or, for a dtype no
// kernel has (float64, complex), the CPU fallback of the op's out= overload with the
// real output.
#pragma once

#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>

#include <array>
#include <type_traits>

#include "launch/elementwise.h"

namespace metalx::launch {

void checkInplaceOutput(const at::Tensor& self, at::IntArrayRef sizes, const at::TensorOptions& options);
void resizeOutOutput(const at::Tensor& out, at::IntArrayRef sizes, at::IntArrayRef strides,
                     const at::TensorOptions& options);
// A temporary output when `out` cannot take the strides the op produces.
at::Tensor proxyOutputIfNeeded(const at::Tensor& out, at::IntArrayRef sizes, at::IntArrayRef strides,
                               const at::TensorOptions& options);

template <class Meta>
void passOutputToMeta(Meta& meta, int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                      at::TensorOptions options) {
  // TensorIterator metas record the output in their operands; plain metas need nothing.
  if constexpr (std::is_base_of_v<at::TensorIteratorBase, Meta>)
    meta.Meta::set_output_raw_strided(i, sizes, strides, options);
}

template <class Meta, int N = 1>
class FunctionalOp final : public Meta {
 public:
  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options) override {
    set_output_raw_strided(i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options) override {
    outputs[i] = strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
    passOutputToMeta<Meta>(*this, i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t i) override { return outputs[i]; }
  void finish() {}

  std::array<at::Tensor, N> outputs;
};

template <class Meta, int N = 1>
class OutOp final : public Meta {
 public:
  template <class... T>
  explicit OutOp(const T&... outs) : outputs{outs...} {}

  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options) override {
    resizeOutOutput(outputs[i], sizes, strides, options);
    proxies[i] = proxyOutputIfNeeded(outputs[i], sizes, strides, options);
    passOutputToMeta<Meta>(*this, i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options) override {
    resizeOutOutput(outputs[i], sizes, strides, options);
    passOutputToMeta<Meta>(*this, i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t i) override { return proxies[i].defined() ? proxies[i] : outputs[i]; }
  void finish() {
    for (int i = 0; i < N; ++i)
      if (proxies[i].defined()) outputs[i].copy_(proxies[i]);
  }

  std::array<at::Tensor, N> outputs;
  std::array<at::Tensor, N> proxies;
};

template <class Meta>
class InplaceOp final : public Meta {
 public:
  explicit InplaceOp(const at::Tensor& self) : self_(self) {}

  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options) override {
    checkInplaceOutput(self_, sizes, options);
    proxy_ = proxyOutputIfNeeded(self_, sizes, strides, options);
    passOutputToMeta<Meta>(*this, i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options) override {
    checkInplaceOutput(self_, sizes, options);
    passOutputToMeta<Meta>(*this, i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t) override { return proxy_.defined() ? proxy_ : self_; }
  void finish() {
    if (proxy_.defined()) self_.copy_(proxy_);
  }

 private:
  const at::Tensor& self_;
  at::Tensor proxy_;
};

// Runs `op` (an .out overload) through the CPU fallback with `args` followed by the
// outputs, counted in the fallback report like any op without a kernel.
void runOutOnCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack& stack);

template <class... Args>
void cpuFallbackOut(const c10::OperatorHandle& op, at::ArrayRef<at::Tensor> outputs, const Args&... args) {
  torch::jit::Stack stack;
  stack.reserve(sizeof...(Args) + outputs.size());
  (stack.emplace_back(args), ...);
  for (const at::Tensor& out : outputs) stack.emplace_back(out);
  runOutOnCpuFallback(op, stack);
}

// What an elementwise op's kernels are like, beyond their dtypes.
enum ElementwiseTraits : unsigned {
  kPredicate = 1,        // they write bool, whatever the input dtype
  kIntegerDivision = 2,  // an integer divisor (input 1) of 0 raises, as on CPU
  kOpmathScalarB = 4,    // in half and bfloat, a second input that is one value stays in
                         // float (CPU's mul and div: original_scalar_value<opmath_t>)
};

// An elementwise op: its kernels and the .out overload its CPU fallback runs.
class ElementwiseOp {
 public:
  ElementwiseOp(const char* kernel_prefix, DTypeSet dtypes, const char* out_name, const char* out_overload,
                unsigned traits = 0)
      : kernels(kernel_prefix, dtypes, (traits & kPredicate) != 0, (traits & kOpmathScalarB) != 0),
        integer_division(traits & kIntegerDivision),
        out_name_(out_name),
        out_overload_(out_overload) {}

  const c10::OperatorHandle& outOperator();

  KernelFamily kernels;
  const bool integer_division;

 private:
  const char* out_name_;
  const char* out_overload_;
  std::once_flag once_;
  std::optional<c10::OperatorHandle> out_op_;
};

// Raises ZeroDivisionError when `iter` divides integers and its divisor (input 1) has a
// zero. A divisor on the device costs a check there and a synchronisation (integer
// division only: GPUs would return garbage where CPU raises).
void checkIntegerDivisor(at::TensorIteratorBase& iter);

// Runs `def`'s kernels over the built iterator `it`, or its CPU fallback when no kernel
// has the dtype; `args` are the op's arguments, for that fallback.
template <class... Args>
void runNative(at::TensorIteratorBase& it, ElementwiseOp& def, const ElementwiseOptions& options,
               const Args&... args) {
  const auto dtype = kernelDtypeFor(elementwiseDtype(it, options.first_typed_input), def.kernels);
  if (dtype && def.kernels.supports(*dtype)) {
    if (def.integer_division) checkIntegerDivisor(it);
    runElementwise(it, def.kernels, options);
    return;
  }
  cpuFallbackOut(def.outOperator(), {it.maybe_get_output(0)}, args...);
}

// The three variants of a structured elementwise op whose meta takes `args` (self first).
template <class Meta, class... Args>
at::Tensor elementwiseFunctional(ElementwiseOp& def, const ElementwiseOptions& options, const Args&... args) {
  FunctionalOp<Meta> op;
  op.meta(args...);
  runNative(op, def, options, args...);
  return std::move(op.outputs[0]);
}

template <class Meta, class... Args>
void elementwiseInplace(const at::Tensor& self, ElementwiseOp& def, const ElementwiseOptions& options,
                        const Args&... args) {
  InplaceOp<Meta> op(self);
  op.meta(args...);
  runNative(op, def, options, args...);
  op.finish();
}

template <class Meta, class... Args>
void elementwiseOut(const at::Tensor& out, ElementwiseOp& def, const ElementwiseOptions& options,
                    const Args&... args) {
  OutOp<Meta> op(out);
  op.meta(args...);
  runNative(op, def, options, args...);
  op.finish();
}

}  // namespace metalx::launch
