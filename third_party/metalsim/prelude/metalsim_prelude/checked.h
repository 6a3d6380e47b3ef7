// Shader validation and the kernel watchdog, for run-time compiled kernels only.
//
// Translations made with validation or the watchdog include this header after
// metal_stdlib (and metalsim/checked_abi.h before it). Built-in kernels never include
// it, so they are neither slowed nor rebuilt by anything here.
//
// Validation: the translator rewrites every `device T*` / `constant T*` /
// `threadgroup T*` type the source spells (kernel parameters, locals, casts, helper
// parameters; not struct members, whose layout is the buffer's) into msim_d<T> /
// msim_c<T> / msim_t<T> (= metalsim_checked::ptr<T> / ptr<const T>), threadgroup
// arrays into tg_array, and reinterpret_cast / const_cast into msim_cast. Such a
// pointer carries the range of the buffer binding, [[threadgroup(n)]] argument or
// threadgroup array it came from, and every access through it (p[i], *p, p->m,
// atomics, SIMD-group matrix loads) is checked against that range first; an access
// outside fails the dispatch through the simulator, before any byte outside is touched,
// with a message naming the kernel, argument (or variable), offset, type and thread.
// Pointer arithmetic keeps the range; a pointer made from a plain one (&p[i], a thread
// pointer) has none and is not checked, nor are threadgroup scalars (`threadgroup
// uint n;`), which only a pointer could take out of range.
//
// Watchdog: the translator adds metalsim_checked::tick() to every loop iteration. It
// reads one flag that the simulator raises only while some dispatch is past its
// deadline; only then does it ask the simulator whether to unwind this one.
//
// Nothing here may include a standard header (the keyword macros are defined by now):
// the prelude includes <cstdint>, <cstring> and <type_traits> first.
#pragma once

namespace metalsim_checked {

namespace abi = ::metalsim::checked_abi;

inline const volatile uint32_t never_late = 0;
__attribute__((visibility("hidden"))) inline const abi::Api* api = nullptr;
__attribute__((visibility("hidden"))) inline const volatile uint32_t* alarm = &never_late;

inline void attach(const abi::Api* table) {
  api = table;
  alarm = table->watchdog_alarm;
}

// True, after making sure this dispatch is not past its deadline (else it unwinds).
__attribute__((always_inline)) inline bool tick() {
  if (__builtin_expect(*alarm != 0, 0)) api->watchdog_check();
  return true;
}

// The compiler's spelling of T, inside its pretty function name; the simulator cuts
// the type out of it for messages.
template <class T>
const char* typeSpelling() {
  return __PRETTY_FUNCTION__;
}

template <class T>
[[noreturn]] __attribute__((noinline, cold)) void outside(uintptr_t lo, uintptr_t hi, uintptr_t at, size_t size,
                                                         uint64_t caller, const char* variable = nullptr) {
  abi::Access a{reinterpret_cast<const void*>(lo), reinterpret_cast<const void*>(hi),
                reinterpret_cast<const void*>(at), size, typeSpelling<std::remove_cv_t<T>>(), caller, variable};
  api->violation(&a);
  __builtin_unreachable();
}

template <class A>
class tg_array;

template <class T>
class ptr {
  template <class U>
  friend class ptr;
  template <class A>
  friend class tg_array;

 public:
  using element_type = T;

  ptr() = default;
  ptr(decltype(nullptr)) {}
  // A plain pointer: no range is known, so accesses through it are not checked.
  ptr(T* raw) : p_(raw) {}
  template <class U, std::enable_if_t<!std::is_convertible_v<U*, T*>, int> = 0>
  explicit ptr(U* raw) : p_((T*)raw) {}
  // device float* -> constant float* / device void*: implicit, as for plain pointers.
  template <class U, std::enable_if_t<std::is_convertible_v<U*, T*> && !std::is_same_v<U, T>, int> = 0>
  ptr(const ptr<U>& o) : p_(o.p_), lo_(o.lo_), hi_(o.hi_), thread_(o.thread_) {}
  // Casts to another element type keep the range: (device float4*)p is checked too.
  template <class U, std::enable_if_t<!std::is_convertible_v<U*, T*>, int> = 0>
  explicit ptr(const ptr<U>& o) : p_((T*)(o.p_)), lo_(o.lo_), hi_(o.hi_), thread_(o.thread_) {}

  // The pointer a kernel parameter gets: the binding's range [base, base + length).
  static ptr bound(void* base, uint64_t length, uint64_t caller) {
    ptr r(static_cast<T*>(base));
    r.lo_ = reinterpret_cast<uintptr_t>(base);
    r.hi_ = r.lo_ + length;
    r.thread_ = caller;
    return r;
  }

  // Plain pointers out (helper calls that take one, comparisons, casts): unchecked.
  operator T*() const { return p_; }
  template <class U, std::enable_if_t<!std::is_same_v<U, T>, int> = 0>
  explicit operator U*() const {
    return (U*)p_;
  }
  // (ulong)p: the address, as for a plain pointer.
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  explicit operator I() const {
    return static_cast<I>(reinterpret_cast<uintptr_t>(p_));
  }
  T* get() const { return p_; }

  // Checks that sizeof(U) bytes at `a` lie in the range, else fails the dispatch.
  template <class U = T>
  U* check(U* a) const {
    const uintptr_t at = reinterpret_cast<uintptr_t>(a);
    if (__builtin_expect(at < lo_ || at > hi_ - sizeof(U), 0)) outside<U>(lo_, hi_, at, sizeof(U), thread_);
    return a;
  }
  // Elements first..last (inclusive offsets from p) lie in the range.
  template <class U = T>
  U* checkSpan(size_t first, size_t last) const {
    check<U>(p_ + last);
    return check<U>(p_ + first) - first;
  }

  template <class I, class U = T, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  U& operator[](I i) const {
    return *check<U>(p_ + i);
  }
  template <class U = T>
  U& operator*() const {
    return *check<U>(p_);
  }
  template <class U = T>
  U* operator->() const {
    return check<U>(p_);
  }

  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  ptr operator+(I i) const {
    ptr r = *this;
    r.p_ = p_ + i;
    return r;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  friend ptr operator+(I i, const ptr& q) {
    return q + i;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  ptr operator-(I i) const {
    ptr r = *this;
    r.p_ = p_ - i;
    return r;
  }
  template <class U>
  ptrdiff_t operator-(const ptr<U>& o) const {
    return p_ - o.p_;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  ptr& operator+=(I i) {
    p_ += i;
    return *this;
  }
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  ptr& operator-=(I i) {
    p_ -= i;
    return *this;
  }
  ptr& operator++() {
    ++p_;
    return *this;
  }
  ptr& operator--() {
    --p_;
    return *this;
  }
  ptr operator++(int) {
    ptr r = *this;
    ++p_;
    return r;
  }
  ptr operator--(int) {
    ptr r = *this;
    --p_;
    return r;
  }

 private:
  T* p_ = nullptr;
  uintptr_t lo_ = 0;
  uintptr_t hi_ = ~uintptr_t(0);
  uint64_t thread_ = ~uint64_t(0);  // the binding thread's linear grid position
};

// A threadgroup array (`threadgroup float tile[16][17];` becomes
// `auto tile = tg_array<float[16][17]>(...)`): indexing is checked against the whole
// variable, as an access through a pointer to it is, and the message names it. It is a
// checked pointer to its first element, so it decays as the array would: into helper
// parameters (`threadgroup T* buf`, T deduced), pointer arithmetic, simdgroup_load.
// Indexing a dimension that is not the last gives the row, still checked.
template <class E, size_t N>
class tg_array<E[N]> : public ptr<E> {
 public:
  // The variable itself: the range is all of it.
  tg_array(E (&whole)[N], const char* name) : tg_array(whole, reinterpret_cast<uintptr_t>(&whole), name) {
    this->hi_ = this->lo_ + sizeof(whole);
  }
  // A row of an enclosing array: the enclosing variable's range.
  tg_array(E* first, uintptr_t lo, uintptr_t hi, const char* name) : tg_array(first, lo, name) { this->hi_ = hi; }

  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  decltype(auto) operator[](I i) const {
    E* at = this->p_ + i;
    if constexpr (std::is_array_v<E>) {
      return tg_array<E>(*at, this->lo_, this->hi_, name_);
    } else {
      const uintptr_t a = reinterpret_cast<uintptr_t>(at);
      if (__builtin_expect(a < this->lo_ || a > this->hi_ - sizeof(E), 0))
        outside<E>(this->lo_, this->hi_, a, sizeof(E), this->thread_, name_);
      return *at;
    }
  }

 private:
  tg_array(E* first, uintptr_t lo, const char* name) : ptr<E>(first), name_(name) { this->lo_ = lo; }
  const char* name_;
};

template <class A, class B>
bool operator==(const ptr<A>& a, const ptr<B>& b) { return a.get() == b.get(); }
template <class A, class B>
bool operator!=(const ptr<A>& a, const ptr<B>& b) { return a.get() != b.get(); }
template <class A, class B>
bool operator<(const ptr<A>& a, const ptr<B>& b) { return a.get() < b.get(); }
template <class A, class B>
bool operator<=(const ptr<A>& a, const ptr<B>& b) { return a.get() <= b.get(); }
template <class A, class B>
bool operator>(const ptr<A>& a, const ptr<B>& b) { return a.get() > b.get(); }
template <class A, class B>
bool operator>=(const ptr<A>& a, const ptr<B>& b) { return a.get() >= b.get(); }

template <class P>
struct is_ptr : std::false_type {};
template <class T>
struct is_ptr<ptr<T>> : std::true_type {};

// What `reinterpret_cast<To>(x)` becomes in a validated translation: a checked
// pointer cannot be reinterpret_cast (it is a class), so casts to a checked pointer type
// construct one (keeping the range), casts of one to an address or a plain pointer type
// use its address, and every other cast is the language's own.
template <class To, class From>
__attribute__((always_inline)) inline To reinterpret(From&& from) {
  using F = std::remove_cv_t<std::remove_reference_t<From>>;
  if constexpr (is_ptr<std::remove_cv_t<To>>::value) return To(from);
  else if constexpr (is_ptr<F>::value) return reinterpret_cast<To>(from.get());
  else return reinterpret_cast<To>(static_cast<From&&>(from));
}

// Binds [[buffer(Index)]] to parameter I of the kernel F: a checked pointer gets the
// binding's range; a reference or value (constant Params& p) must fit in it.
// The thread's linear position in the grid (x fastest), for messages.
inline uint64_t linearThread(const metalsim::kabi::Launch& L, const metalsim::kabi::ThreadIds& t) {
  const metalsim::kabi::U3 pos = t.thread_position_in_grid;
  return (uint64_t(pos.z) * L.threads_per_grid.y + pos.y) * L.threads_per_grid.x + pos.x;
}

// Binds [[threadgroup(Index)]] to parameter I of the kernel F: a checked pointer gets
// the length the encoder set for it.
template <class F, size_t I, uint32_t Index>
inline typename metalsim_kernel_ns::FnArgs<F>::template at<I> bindThreadgroup(const metalsim::kabi::Launch& L,
                                                                            const metalsim::kabi::GroupMemory& M,
                                                                            const metalsim::kabi::ThreadIds& t,
                                                                            const uint64_t* lengths) {
  using P = typename metalsim_kernel_ns::FnArgs<F>::template at<I>;
  if constexpr (is_ptr<P>::value)
    return P::bound(M.dynamic[Index], lengths[metalsim::kabi::kMaxBindings + Index], linearThread(L, t));
  else return static_cast<P>(M.dynamic[Index]);  // a pointer type the translator did not rewrite
}

template <class F, size_t I, uint32_t Index>
inline typename metalsim_kernel_ns::FnArgs<F>::template at<I> bindBuffer(const metalsim::kabi::Launch& L,
                                                                       const metalsim::kabi::ThreadIds& t,
                                                                       const uint64_t* lengths) {
  using P = typename metalsim_kernel_ns::FnArgs<F>::template at<I>;
  void* base = L.buffers[Index];
  const uint64_t caller = linearThread(L, t);
  if constexpr (is_ptr<P>::value) {
    return P::bound(base, lengths[Index], caller);
  } else if constexpr (std::is_pointer_v<P>) {
    return static_cast<P>(base);  // a pointer type the translator did not rewrite
  } else {
    using V = std::remove_reference_t<P>;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(base);
    if (__builtin_expect(lengths[Index] < sizeof(V), 0)) outside<V>(lo, lo + lengths[Index], lo, sizeof(V), caller);
    if constexpr (std::is_reference_v<P>) return *static_cast<V*>(base);
    else return *static_cast<const V*>(base);
  }
}

inline const uint64_t* boundLengths() { return api->bound_lengths(); }

}  // namespace metalsim_checked

// The spellings the translator writes for `device T*`, `constant T*` / `const device T*`,
// `volatile device T*` and both (short, so the user's columns stay put).
template <class T>
using msim_d = ::metalsim_checked::ptr<T>;
template <class T>
using msim_c = ::metalsim_checked::ptr<const T>;
template <class T>
using msim_v = ::metalsim_checked::ptr<volatile T>;
template <class T>
using msim_cv = ::metalsim_checked::ptr<const volatile T>;
// `threadgroup T*` (const / volatile spellings share the ones above).
template <class T>
using msim_t = ::metalsim_checked::ptr<T>;
// reinterpret_cast and const_cast, which cannot take a class (see reinterpret).
template <class To, class From>
__attribute__((always_inline)) inline To msim_cast(From&& from) {
  return ::metalsim_checked::reinterpret<To>(static_cast<From&&>(from));
}

// Prelude functions that take device pointers by a deduced type get the checked
// pointer's element, checked first.
namespace metal {

#define METALSIM_CHECKED_ATOMIC(name)                                                   \
  template <class A, class... R>                                                        \
  inline auto name(::metalsim_checked::ptr<A> obj, R... rest)->decltype(name(&*obj, rest...)) { \
    return name(&*obj, rest...);                                                        \
  }
METALSIM_CHECKED_ATOMIC(atomic_store_explicit)
METALSIM_CHECKED_ATOMIC(atomic_load_explicit)
METALSIM_CHECKED_ATOMIC(atomic_exchange_explicit)
METALSIM_CHECKED_ATOMIC(atomic_compare_exchange_weak_explicit)
METALSIM_CHECKED_ATOMIC(atomic_compare_exchange_strong_explicit)
METALSIM_CHECKED_ATOMIC(atomic_fetch_add_explicit)
METALSIM_CHECKED_ATOMIC(atomic_fetch_sub_explicit)
METALSIM_CHECKED_ATOMIC(atomic_fetch_and_explicit)
METALSIM_CHECKED_ATOMIC(atomic_fetch_or_explicit)
METALSIM_CHECKED_ATOMIC(atomic_fetch_xor_explicit)
METALSIM_CHECKED_ATOMIC(atomic_fetch_min_explicit)
METALSIM_CHECKED_ATOMIC(atomic_fetch_max_explicit)
#undef METALSIM_CHECKED_ATOMIC

// The 8x8 tile's first and last elements, as simdgroup_load/store address them.
inline void metalsim_checked_tile(ulong s, ulong2 origin, bool transpose, size_t* first, size_t* last) {
  *first = transpose ? origin.x * s + origin.y : origin.y * s + origin.x;
  *last = *first + 7 * s + 7;
}

template <class T, unsigned Cols, unsigned Rows, class E,
          std::enable_if_t<std::is_same_v<std::remove_cv_t<E>, T>, int> = 0>
METALSIM_ALWAYS_INLINE void simdgroup_load(simdgroup_matrix<T, Cols, Rows>& d, ::metalsim_checked::ptr<E> src,
                                           ulong elements_per_row = Cols, ulong2 matrix_origin = ulong2(0),
                                           bool transpose_matrix = false) {
  size_t first, last;
  metalsim_checked_tile(elements_per_row, matrix_origin, transpose_matrix, &first, &last);
  simdgroup_load(d, static_cast<const T*>(src.checkSpan(first, last)), elements_per_row, matrix_origin,
                 transpose_matrix);
}

template <class T, unsigned Cols, unsigned Rows>
METALSIM_ALWAYS_INLINE void simdgroup_store(simdgroup_matrix<T, Cols, Rows> a, ::metalsim_checked::ptr<T> dst,
                                            ulong elements_per_row = Cols, ulong2 matrix_origin = ulong2(0),
                                            bool transpose_matrix = false, unsigned line = __builtin_LINE()) {
  size_t first, last;
  metalsim_checked_tile(elements_per_row, matrix_origin, transpose_matrix, &first, &last);
  simdgroup_store(a, dst.checkSpan(first, last), elements_per_row, matrix_origin, transpose_matrix, line);
}

}  // namespace metal
