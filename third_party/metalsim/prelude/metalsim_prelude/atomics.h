// MSL atomics: metal::atomic<T>, atomic_int & co, and the atomic_*_explicit functions.
//
// Threadgroups run on different OS threads, so these must be real atomics: they use
// the GCC/clang __atomic builtins on the object's storage. atomic<T> is a plain struct
// of exactly one T, so buffers laid out by the host (an int array viewed as atomic_int)
// line up, and it stays trivially copyable for threadgroup memory.
//
// MSL declares the functions on `volatile device atomic<T>*`; user code usually passes
// a non-volatile pointer. One template taking `volatile atomic<T>*` serves both: template
// deduction accepts the added qualifier. The operand is a non-deduced T, so
// `atomic_fetch_add_explicit(uint_counter, 1, ...)` is not a deduction conflict.
#pragma once

namespace metal {

template <class T>
struct atomic {
  T value;
};

using atomic_int = atomic<int>;
using atomic_uint = atomic<uint>;
using atomic_bool = atomic<bool>;
using atomic_float = atomic<float>;
using atomic_long = atomic<long>;
using atomic_ulong = atomic<ulong>;

enum memory_order {
  memory_order_relaxed,
  memory_order_acquire,
  memory_order_release,
  memory_order_acq_rel,
  memory_order_seq_cst,
};

enum thread_scope {
  thread_scope_thread,
  thread_scope_simdgroup,
  thread_scope_threadgroup,
  thread_scope_device,
};

namespace detail {

template <class T>
struct type_identity {
  using type = T;
};
template <class T>
using nodeduce_t = typename type_identity<T>::type;

constexpr int gcc_order(memory_order o) noexcept {
  return o == memory_order_relaxed   ? __ATOMIC_RELAXED
         : o == memory_order_acquire ? __ATOMIC_ACQUIRE
         : o == memory_order_release ? __ATOMIC_RELEASE
         : o == memory_order_acq_rel ? __ATOMIC_ACQ_REL
                                     : __ATOMIC_SEQ_CST;
}
// Orders that are invalid for a load (release, acq_rel) or a failed CAS are weakened
// to the strongest valid one rather than handed to the builtin (which would reject them).
constexpr int load_order(memory_order o) noexcept {
  return o == memory_order_release ? __ATOMIC_RELAXED : o == memory_order_acq_rel ? __ATOMIC_ACQUIRE : gcc_order(o);
}
constexpr int store_order(memory_order o) noexcept {
  return o == memory_order_acquire ? __ATOMIC_RELAXED : o == memory_order_acq_rel ? __ATOMIC_RELEASE : gcc_order(o);
}

// The unsigned integer with T's size: non-integer atomics (float, bool) operate on it.
template <size_t S> struct bits_of;
template <> struct bits_of<1> { using type = uint8_t; };
template <> struct bits_of<2> { using type = uint16_t; };
template <> struct bits_of<4> { using type = uint32_t; };
template <> struct bits_of<8> { using type = uint64_t; };
template <class T>
using bits_t = typename bits_of<sizeof(T)>::type;

template <class T>
inline volatile bits_t<T>* raw(volatile atomic<T>* obj) noexcept {
  static_assert(sizeof(atomic<T>) == sizeof(T), "atomic<T> must be exactly a T");
  return reinterpret_cast<volatile bits_t<T>*>(&obj->value);
}

// Read-modify-write by compare-exchange: floats and min/max (which __atomic lacks).
template <class T, class F>
inline T rmw_loop(volatile atomic<T>* obj, F f, memory_order o) noexcept {
  volatile bits_t<T>* p = raw(obj);
  bits_t<T> old_bits = __atomic_load_n(p, __ATOMIC_RELAXED);
  for (;;) {
    T old_value;
    std::memcpy(&old_value, &old_bits, sizeof(T));
    const T new_value = f(old_value);
    bits_t<T> new_bits;
    std::memcpy(&new_bits, &new_value, sizeof(T));
    if (__atomic_compare_exchange_n(p, &old_bits, new_bits, true, gcc_order(o), __ATOMIC_RELAXED))
      return old_value;
  }
}

}  // namespace detail

template <class T>
inline void atomic_store_explicit(volatile atomic<T>* obj, detail::nodeduce_t<T> desired, memory_order o) noexcept {
  detail::bits_t<T> b;
  std::memcpy(&b, &desired, sizeof(T));
  __atomic_store_n(detail::raw(obj), b, detail::store_order(o));
}

template <class T>
inline T atomic_load_explicit(const volatile atomic<T>* obj, memory_order o) noexcept {
  const detail::bits_t<T> b = __atomic_load_n(
      reinterpret_cast<const volatile detail::bits_t<T>*>(&obj->value), detail::load_order(o));
  T r;
  std::memcpy(&r, &b, sizeof(T));
  return r;
}

template <class T>
inline T atomic_exchange_explicit(volatile atomic<T>* obj, detail::nodeduce_t<T> desired, memory_order o) noexcept {
  detail::bits_t<T> b;
  std::memcpy(&b, &desired, sizeof(T));
  b = __atomic_exchange_n(detail::raw(obj), b, detail::gcc_order(o));
  T r;
  std::memcpy(&r, &b, sizeof(T));
  return r;
}

// Compares bit patterns (so a float NaN can match itself, and -0.0 != +0.0), as the
// hardware does. On failure *expected receives the current value.
template <class T>
inline bool atomic_compare_exchange_weak_explicit(volatile atomic<T>* obj, detail::nodeduce_t<T>* expected,
                                                  detail::nodeduce_t<T> desired, memory_order success,
                                                  memory_order failure) noexcept {
  detail::bits_t<T> e, d;
  std::memcpy(&e, expected, sizeof(T));
  std::memcpy(&d, &desired, sizeof(T));
  const bool ok = __atomic_compare_exchange_n(detail::raw(obj), &e, d, true, detail::gcc_order(success),
                                              detail::load_order(failure));
  if (!ok) std::memcpy(expected, &e, sizeof(T));
  return ok;
}
template <class T>
inline bool atomic_compare_exchange_strong_explicit(volatile atomic<T>* obj, detail::nodeduce_t<T>* expected,
                                                    detail::nodeduce_t<T> desired, memory_order success,
                                                    memory_order failure) noexcept {
  detail::bits_t<T> e, d;
  std::memcpy(&e, expected, sizeof(T));
  std::memcpy(&d, &desired, sizeof(T));
  const bool ok = __atomic_compare_exchange_n(detail::raw(obj), &e, d, false, detail::gcc_order(success),
                                              detail::load_order(failure));
  if (!ok) std::memcpy(expected, &e, sizeof(T));
  return ok;
}

// fetch_add / fetch_sub: native for integers, a CAS loop for floating types.
template <class T>
inline T atomic_fetch_add_explicit(volatile atomic<T>* obj, detail::nodeduce_t<T> operand, memory_order o) noexcept {
  if constexpr (std::is_integral<T>::value) {
    return __atomic_fetch_add(&obj->value, operand, detail::gcc_order(o));
  } else {
    return detail::rmw_loop(obj, [operand](T v) { return static_cast<T>(v + operand); }, o);
  }
}
template <class T>
inline T atomic_fetch_sub_explicit(volatile atomic<T>* obj, detail::nodeduce_t<T> operand, memory_order o) noexcept {
  if constexpr (std::is_integral<T>::value) {
    return __atomic_fetch_sub(&obj->value, operand, detail::gcc_order(o));
  } else {
    return detail::rmw_loop(obj, [operand](T v) { return static_cast<T>(v - operand); }, o);
  }
}

#define METALSIM_ATOMIC_BITOP(name, builtin)                                                         \
  template <class T>                                                                               \
  inline T name(volatile atomic<T>* obj, detail::nodeduce_t<T> operand, memory_order o) noexcept { \
    static_assert(std::is_integral<T>::value, #name " needs an integer atomic");                   \
    return builtin(&obj->value, operand, detail::gcc_order(o));                                    \
  }
METALSIM_ATOMIC_BITOP(atomic_fetch_and_explicit, __atomic_fetch_and)
METALSIM_ATOMIC_BITOP(atomic_fetch_or_explicit, __atomic_fetch_or)
METALSIM_ATOMIC_BITOP(atomic_fetch_xor_explicit, __atomic_fetch_xor)
#undef METALSIM_ATOMIC_BITOP

// min/max: floats with fmin/fmax semantics (a NaN operand leaves the value unchanged).
template <class T>
inline T atomic_fetch_min_explicit(volatile atomic<T>* obj, detail::nodeduce_t<T> operand, memory_order o) noexcept {
  return detail::rmw_loop(obj, [operand](T v) { return metal::min(v, operand); }, o);
}
template <class T>
inline T atomic_fetch_max_explicit(volatile atomic<T>* obj, detail::nodeduce_t<T> operand, memory_order o) noexcept {
  return detail::rmw_loop(obj, [operand](T v) { return metal::max(v, operand); }, o);
}

}  // namespace metal
