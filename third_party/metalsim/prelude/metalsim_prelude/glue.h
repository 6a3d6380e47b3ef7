// How the translator's generated wrappers turn a dispatch into a kernel call: each
// parameter is bound by its [[...]] attribute, with its C++ type taken from the kernel
// function's own signature, so templates and every MSL scalar/vector type just work.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>

#include "metalsim/kernel_abi.h"

namespace metalsim::kernel {

template <class F>
struct FnArgs;
template <class R, class... A>
struct FnArgs<R (*)(A...)> {
  template <size_t I>
  using at = std::remove_cv_t<std::tuple_element_t<I, std::tuple<A...>>>;
};

// A position attribute as the parameter declares it: uint, ushort, uint2, ushort3, ...
template <class P>
inline P attrCast(kabi::U3 u) {
  if constexpr (std::is_arithmetic_v<P>) {
    return static_cast<P>(u.x);
  } else {
    P r{};
    using E = std::remove_reference_t<decltype(r.x)>;
    r.x = static_cast<E>(u.x);
    r.y = static_cast<E>(u.y);
    if constexpr (sizeof(P) / sizeof(E) >= 3) r.z = static_cast<E>(u.z);
    return r;
  }
}

template <class P>
inline P attrCast(uint32_t v) {
  return static_cast<P>(v);
}

template <class F, size_t I, kabi::Bind B, uint32_t Index>
inline typename FnArgs<F>::template at<I> bindArg(const kabi::Launch& L,
                                                  const kabi::GroupMemory& M,
                                                  const kabi::ThreadIds& t) {
  using P = typename FnArgs<F>::template at<I>;
  using kabi::Bind;
  if constexpr (B == Bind::Buffer) {
    if constexpr (std::is_pointer_v<P>) {
      return static_cast<P>(L.buffers[Index]);
    } else if constexpr (std::is_reference_v<P>) {
      return *static_cast<std::remove_reference_t<P>*>(L.buffers[Index]);
    } else {
      return *static_cast<const P*>(L.buffers[Index]);
    }
  } else if constexpr (B == Bind::Threadgroup) {
    static_assert(std::is_pointer_v<P>, "[[threadgroup(n)]] parameters must be pointers");
    return static_cast<P>(M.dynamic[Index]);
  } else if constexpr (B == Bind::ThreadPositionInGrid) {
    return attrCast<P>(t.thread_position_in_grid);
  } else if constexpr (B == Bind::ThreadPositionInThreadgroup) {
    return attrCast<P>(t.thread_position_in_threadgroup);
  } else if constexpr (B == Bind::ThreadgroupPositionInGrid) {
    return attrCast<P>(t.threadgroup_position_in_grid);
  } else if constexpr (B == Bind::ThreadsPerThreadgroup) {
    return attrCast<P>(t.threads_per_threadgroup);
  } else if constexpr (B == Bind::DispatchThreadsPerThreadgroup) {
    return attrCast<P>(t.dispatch_threads_per_threadgroup);
  } else if constexpr (B == Bind::ThreadgroupsPerGrid) {
    return attrCast<P>(t.threadgroups_per_grid);
  } else if constexpr (B == Bind::ThreadsPerGrid || B == Bind::GridSize) {
    return attrCast<P>(t.threads_per_grid);
  } else if constexpr (B == Bind::GridOrigin) {
    return attrCast<P>(kabi::U3{0, 0, 0});
  } else if constexpr (B == Bind::ThreadIndexInThreadgroup) {
    return attrCast<P>(t.thread_index_in_threadgroup);
  } else if constexpr (B == Bind::ThreadIndexInSimdgroup) {
    return attrCast<P>(t.thread_index_in_simdgroup);
  } else if constexpr (B == Bind::SimdgroupIndexInThreadgroup) {
    return attrCast<P>(t.simdgroup_index_in_threadgroup);
  } else if constexpr (B == Bind::SimdgroupsPerThreadgroup) {
    return attrCast<P>(t.simdgroups_per_threadgroup);
  } else if constexpr (B == Bind::ThreadsPerSimdgroup || B == Bind::ThreadExecutionWidth) {
    return attrCast<P>(kabi::kSimdWidth);
  } else if constexpr (B == Bind::ThreadIndexInQuadgroup) {
    return attrCast<P>(t.thread_index_in_quadgroup);
  } else {
    static_assert(B == Bind::QuadgroupIndexInThreadgroup, "unhandled binding");
    return attrCast<P>(t.quadgroup_index_in_threadgroup);
  }
}

}  // namespace metalsim::kernel

// Generated code comes after the prelude's keyword macros, where `kernel` expands to
// nothing and `metalsim::kernel::` would no longer parse: it uses this alias instead.
namespace metalsim_kernel_ns = ::metalsim::kernel;
