// SIMD-group and quad-group functions (simd_sum, simd_shuffle, simd_ballot, quad_*, ...).
//
// A SIMD-group function needs the values of the other lanes, which in the simulator are
// other fibers. Each lane fills a SimdRequest on its own stack (operand, result slot,
// argument, and a resolver function for the operation) and calls host_api->simd, which
// blocks until the simulator has gathered every lane that takes part and has called the
// resolver once for all of them. The resolvers are plain functions over an array of
// requests (metalsim::kernel::detail), testable without the simulator.
//
// Call sites: as for barriers (sync.h), the public function is always inlined and calls
// a never-inlined helper whose return address identifies the call site in the kernel,
// so that lanes at different calls (divergent code) are never combined.
#pragma once

namespace metalsim {
namespace kernel {
namespace detail {

using kabi::SimdRequest;
using Resolver = void (*)(SimdRequest* const* lanes, uint32_t active_mask);

// ---- resolvers -------------------------------------------------------------------------
// lanes[i] is lane i's request for every bit i of `active`, nullptr otherwise. Every
// active lane's `out` is written. Quad requests (quad != 0) combine only lanes of the
// same quad (lanes 4k..4k+3); the simulator may pass one quad or several at once.

inline uint32_t group_mask(uint32_t lane, bool quad) noexcept {
  return quad ? (0xFu << (lane & ~3u)) : 0xFFFFFFFFu;
}
inline bool is_quad(SimdRequest* const* lanes, uint32_t active) noexcept {
  return active != 0 && lanes[__builtin_ctz(active)]->quad != 0;
}
template <class T>
inline const T& operand(const SimdRequest* r) noexcept {
  return *static_cast<const T*>(r->in);
}
template <class R>
inline void result(SimdRequest* r, const R& v) noexcept {
  std::memcpy(r->out, &v, sizeof(R));
}

// Calls f(members) once per group of active lanes (the SIMD group, or each quad).
template <class F>
inline void for_each_group(SimdRequest* const* lanes, uint32_t active, F f) {
  if (!is_quad(lanes, active)) {
    if (active) f(active);
    return;
  }
  for (uint32_t base = 0; base < kabi::kSimdWidth; base += 4) {
    const uint32_t members = active & (0xFu << base);
    if (members) f(members);
  }
}

// Combining operations. Floating min/max ignore NaN operands (fmin/fmax), via metal::.
struct OpSum {
  template <class T> static T apply(const T& a, const T& b) { return static_cast<T>(a + b); }
  template <class T> static T identity() { return T(0); }
};
struct OpProduct {
  template <class T> static T apply(const T& a, const T& b) { return static_cast<T>(a * b); }
  template <class T> static T identity() { return T(1); }
};
struct OpMin {
  template <class T> static T apply(const T& a, const T& b) { return metal::min(a, b); }
};
struct OpMax {
  template <class T> static T apply(const T& a, const T& b) { return metal::max(a, b); }
};
struct OpAnd {
  template <class T> static T apply(const T& a, const T& b) { return static_cast<T>(a & b); }
};
struct OpOr {
  template <class T> static T apply(const T& a, const T& b) { return static_cast<T>(a | b); }
};
struct OpXor {
  template <class T> static T apply(const T& a, const T& b) { return static_cast<T>(a ^ b); }
};

// Reduction over the active lanes of each group, in increasing lane order.
template <class T, class Op>
void resolve_reduce(SimdRequest* const* lanes, uint32_t active) {
  for_each_group(lanes, active, [&](uint32_t members) {
    uint32_t m = members;
    T acc = operand<T>(lanes[__builtin_ctz(m)]);
    for (m &= m - 1; m; m &= m - 1) acc = Op::apply(acc, operand<T>(lanes[__builtin_ctz(m)]));
    for (m = members; m; m &= m - 1) result(lanes[__builtin_ctz(m)], acc);
  });
}

// Prefix scan over the active lanes of each group: inclusive includes the lane itself,
// exclusive starts from the identity (0 for sum, 1 for product).
template <class T, class Op, bool Inclusive>
void resolve_prefix(SimdRequest* const* lanes, uint32_t active) {
  for_each_group(lanes, active, [&](uint32_t members) {
    T acc = Op::template identity<T>();
    bool first = true;
    for (uint32_t m = members; m; m &= m - 1) {
      SimdRequest* r = lanes[__builtin_ctz(m)];
      const T x = operand<T>(r);
      if (Inclusive) {
        acc = first ? x : Op::apply(acc, x);  // no identity: keeps e.g. -0.0 intact
        result(r, acc);
      } else {
        result(r, acc);
        acc = Op::apply(acc, x);
      }
      first = false;
    }
  });
}

// Where a shuffle reads from. Returns the source lane, or -1 when out of range.
enum class Shuffle { Index, Up, Down, Xor, RotateUp, RotateDown, First };

template <Shuffle K>
inline int shuffle_source(uint32_t lane, int32_t arg, bool quad, uint32_t active) noexcept {
  const int width = quad ? 4 : int(kabi::kSimdWidth);
  const int base = quad ? int(lane & ~3u) : 0;
  const int me = int(lane) - base;  // position within the group
  int src;
  switch (K) {
    case Shuffle::Index: src = arg; break;
    case Shuffle::Up: src = me - arg; break;
    case Shuffle::Down: src = me + arg; break;
    case Shuffle::Xor: src = me ^ arg; break;
    case Shuffle::RotateUp: src = ((me - arg) % width + width) % width; break;
    case Shuffle::RotateDown: src = ((me + arg) % width + width) % width; break;
    case Shuffle::First: {
      const uint32_t members = active & group_mask(lane, quad);
      return __builtin_ctz(members);  // lane itself is a member, so members != 0
    }
  }
  if (src < 0 || src >= width) return -1;
  return base + src;
}

// A lane whose source is out of range or inactive keeps its own value.
template <class T, Shuffle K>
void resolve_shuffle(SimdRequest* const* lanes, uint32_t active) {
  for (uint32_t m = active; m; m &= m - 1) {
    const uint32_t lane = __builtin_ctz(m);
    SimdRequest* r = lanes[lane];
    const int src = shuffle_source<K>(lane, r->arg, r->quad != 0, active);
    const bool ok = src >= 0 && ((active >> src) & 1u);
    result(r, operand<T>(ok ? lanes[src] : r));
  }
}

// simd_shuffle_and_fill_up/down: a shift within groups of `width` lanes (the SIMD
// group, a quad, or the `modulo` argument) whose vacated lanes take `fill` from the
// other end. arg packs delta (low 16 bits) and width (high 16 bits).
template <class T>
struct fill_operand {
  T data, fill;
};
template <class T, bool Down>
void resolve_shuffle_fill(SimdRequest* const* lanes, uint32_t active) {
  for (uint32_t m = active; m; m &= m - 1) {
    const uint32_t lane = __builtin_ctz(m);
    SimdRequest* r = lanes[lane];
    const int width = (r->arg >> 16) ? (r->arg >> 16) : (r->quad ? 4 : 32);
    const int delta = r->arg & 0xFFFF;
    const int base = int(lane) / width * width, me = int(lane) - base;
    const int src = Down ? me + delta : me - delta;
    const bool from_data = src >= 0 && src < width;
    const int at = base + (from_data ? src : Down ? src - width : src + width);
    const fill_operand<T>& own = operand<fill_operand<T>>(r);
    const bool ok = at >= 0 && at < 32 && (active >> at & 1u);
    const fill_operand<T>& o = ok ? operand<fill_operand<T>>(lanes[at]) : own;
    result(r, from_data ? o.data : o.fill);
  }
}

// Votes. Operands are bool; results bool (all/any/is_first) or a uint64_t lane mask.
inline void resolve_all(SimdRequest* const* lanes, uint32_t active) {
  for_each_group(lanes, active, [&](uint32_t members) {
    bool v = true;
    for (uint32_t m = members; m; m &= m - 1) v = v && operand<bool>(lanes[__builtin_ctz(m)]);
    for (uint32_t m = members; m; m &= m - 1) result(lanes[__builtin_ctz(m)], v);
  });
}
inline void resolve_any(SimdRequest* const* lanes, uint32_t active) {
  for_each_group(lanes, active, [&](uint32_t members) {
    bool v = false;
    for (uint32_t m = members; m; m &= m - 1) v = v || operand<bool>(lanes[__builtin_ctz(m)]);
    for (uint32_t m = members; m; m &= m - 1) result(lanes[__builtin_ctz(m)], v);
  });
}
inline void resolve_ballot(SimdRequest* const* lanes, uint32_t active) {
  for_each_group(lanes, active, [&](uint32_t members) {
    uint64_t v = 0;
    for (uint32_t m = members; m; m &= m - 1) {
      const uint32_t lane = __builtin_ctz(m);
      if (operand<bool>(lanes[lane])) v |= uint64_t(1) << lane;
    }
    for (uint32_t m = members; m; m &= m - 1) result(lanes[__builtin_ctz(m)], v);
  });
}
inline void resolve_active_mask(SimdRequest* const* lanes, uint32_t active) {
  for_each_group(lanes, active, [&](uint32_t members) {
    const uint64_t v = members;
    for (uint32_t m = members; m; m &= m - 1) result(lanes[__builtin_ctz(m)], v);
  });
}
inline void resolve_is_first(SimdRequest* const* lanes, uint32_t active) {
  for_each_group(lanes, active, [&](uint32_t members) {
    const uint32_t first = __builtin_ctz(members);
    for (uint32_t m = members; m; m &= m - 1) {
      const uint32_t lane = __builtin_ctz(m);
      result(lanes[lane], lane == first);
    }
  });
}

// ---- the call ------------------------------------------------------------------------------
// Never inlined: its return address is the call site in the kernel (see top). `line`
// keeps the optimiser from merging calls on different lines into one call.
METALSIM_NOINLINE_SITE inline void simd_call(Resolver resolve, const void* in, void* out, int32_t arg,
                                             uint8_t quad, unsigned line) {
  __asm__ volatile("" : : "r"(line));
  SimdRequest req;
  req.site = __builtin_return_address(0);
  req.resolve = resolve;
  req.in = in;
  req.out = out;
  req.arg = arg;
  req.lane = 0;
  req.quad = quad;
  host_api->simd(&req);
}

template <class T>
constexpr bool simd_operand_ok() {
  return std::is_trivially_copyable<T>::value && sizeof(T) <= 64;
}

template <class R, class T>
METALSIM_ALWAYS_INLINE R simd_run(Resolver resolve, const T& x, int32_t arg, uint8_t quad, unsigned line) {
  static_assert(simd_operand_ok<T>(), "SIMD-group operands must be scalars or vectors of at most 64 bytes");
  R r;
  simd_call(resolve, &x, &r, arg, quad, line);
  return r;
}

}  // namespace detail
}  // namespace kernel
}  // namespace metalsim

namespace metal {

// Result of simd_ballot / simd_active_threads_mask: one bit per lane.
struct simd_vote {
  using vote_t = uint64_t;
  explicit constexpr simd_vote(vote_t bits = 0) noexcept : v(bits) {}
  explicit constexpr operator vote_t() const noexcept { return v; }
  // True when every lane of the (32-wide) SIMD group has its bit set.
  constexpr bool all() const noexcept { return (v & 0xFFFFFFFFu) == 0xFFFFFFFFu; }
  constexpr bool any() const noexcept { return v != 0; }
  vote_t v;
};

#define METALSIM_SIMD_LINE unsigned line_ = __builtin_LINE()
#define METALSIM_SIMD_NS metalsim::kernel::detail

// Reductions and scans: simd_X (whole SIMD group) and quad_X (the lane's quad).
// (Full names are passed: `and`/`or`/`xor` are operator tokens and cannot be pasted.)
#define METALSIM_SIMD_REDUCE(simd_name, quad_name, op)                                                  \
  template <class T>                                                                                    \
  METALSIM_ALWAYS_INLINE T simd_name(T x, METALSIM_SIMD_LINE) {                                       \
    return METALSIM_SIMD_NS::simd_run<T>(&METALSIM_SIMD_NS::resolve_reduce<T, METALSIM_SIMD_NS::op>, x, \
                                         0, 0, line_);                                                  \
  }                                                                                                     \
  template <class T>                                                                                    \
  METALSIM_ALWAYS_INLINE T quad_name(T x, METALSIM_SIMD_LINE) {                                        \
    return METALSIM_SIMD_NS::simd_run<T>(&METALSIM_SIMD_NS::resolve_reduce<T, METALSIM_SIMD_NS::op>, x, \
                                         0, 1, line_);                                                  \
  }
METALSIM_SIMD_REDUCE(simd_sum, quad_sum, OpSum)
METALSIM_SIMD_REDUCE(simd_product, quad_product, OpProduct)
METALSIM_SIMD_REDUCE(simd_min, quad_min, OpMin)
METALSIM_SIMD_REDUCE(simd_max, quad_max, OpMax)
METALSIM_SIMD_REDUCE(simd_and, quad_and, OpAnd)
METALSIM_SIMD_REDUCE(simd_or, quad_or, OpOr)
METALSIM_SIMD_REDUCE(simd_xor, quad_xor, OpXor)
#undef METALSIM_SIMD_REDUCE

#define METALSIM_SIMD_PREFIX(name, op, inclusive)                                                  \
  template <class T>                                                                               \
  METALSIM_ALWAYS_INLINE T simd_##name(T x, METALSIM_SIMD_LINE) {                                  \
    return METALSIM_SIMD_NS::simd_run<T>(                                                          \
        &METALSIM_SIMD_NS::resolve_prefix<T, METALSIM_SIMD_NS::op, inclusive>, x, 0, 0, line_);    \
  }                                                                                                \
  template <class T>                                                                               \
  METALSIM_ALWAYS_INLINE T quad_##name(T x, METALSIM_SIMD_LINE) {                                  \
    return METALSIM_SIMD_NS::simd_run<T>(                                                          \
        &METALSIM_SIMD_NS::resolve_prefix<T, METALSIM_SIMD_NS::op, inclusive>, x, 0, 1, line_);    \
  }
METALSIM_SIMD_PREFIX(prefix_inclusive_sum, OpSum, true)
METALSIM_SIMD_PREFIX(prefix_exclusive_sum, OpSum, false)
METALSIM_SIMD_PREFIX(prefix_inclusive_product, OpProduct, true)
METALSIM_SIMD_PREFIX(prefix_exclusive_product, OpProduct, false)
#undef METALSIM_SIMD_PREFIX

// Shuffles and broadcasts. The lane/delta/mask argument is a ushort as in MSL.
#define METALSIM_SIMD_SHUFFLE(name, kind)                                                          \
  template <class T>                                                                               \
  METALSIM_ALWAYS_INLINE T simd_##name(T x, ushort arg, METALSIM_SIMD_LINE) {                      \
    return METALSIM_SIMD_NS::simd_run<T>(                                                          \
        &METALSIM_SIMD_NS::resolve_shuffle<T, METALSIM_SIMD_NS::Shuffle::kind>, x, arg, 0, line_); \
  }                                                                                                \
  template <class T>                                                                               \
  METALSIM_ALWAYS_INLINE T quad_##name(T x, ushort arg, METALSIM_SIMD_LINE) {                      \
    return METALSIM_SIMD_NS::simd_run<T>(                                                          \
        &METALSIM_SIMD_NS::resolve_shuffle<T, METALSIM_SIMD_NS::Shuffle::kind>, x, arg, 1, line_); \
  }
METALSIM_SIMD_SHUFFLE(broadcast, Index)
METALSIM_SIMD_SHUFFLE(shuffle, Index)
METALSIM_SIMD_SHUFFLE(shuffle_up, Up)
METALSIM_SIMD_SHUFFLE(shuffle_down, Down)
METALSIM_SIMD_SHUFFLE(shuffle_xor, Xor)
METALSIM_SIMD_SHUFFLE(shuffle_rotate_up, RotateUp)
METALSIM_SIMD_SHUFFLE(shuffle_rotate_down, RotateDown)
#undef METALSIM_SIMD_SHUFFLE

#define METALSIM_SIMD_FILL(prefix, dir, down, quad)                                                 \
  template <class T>                                                                               \
  METALSIM_ALWAYS_INLINE T prefix##_shuffle_and_fill_##dir(T data, T fill, ushort delta,           \
                                                           METALSIM_SIMD_LINE) {                   \
    const METALSIM_SIMD_NS::fill_operand<T> x{data, fill};                                         \
    return METALSIM_SIMD_NS::simd_run<T>(&METALSIM_SIMD_NS::resolve_shuffle_fill<T, down>, x,       \
                                         int32_t(delta), quad, line_);                             \
  }                                                                                                \
  template <class T>                                                                               \
  METALSIM_ALWAYS_INLINE T prefix##_shuffle_and_fill_##dir(T data, T fill, ushort delta,           \
                                                           ushort modulo, METALSIM_SIMD_LINE) {    \
    const METALSIM_SIMD_NS::fill_operand<T> x{data, fill};                                         \
    return METALSIM_SIMD_NS::simd_run<T>(&METALSIM_SIMD_NS::resolve_shuffle_fill<T, down>, x,       \
                                         int32_t(delta) | (int32_t(modulo) << 16), quad, line_);   \
  }
METALSIM_SIMD_FILL(simd, down, true, 0)
METALSIM_SIMD_FILL(simd, up, false, 0)
METALSIM_SIMD_FILL(quad, down, true, 1)
METALSIM_SIMD_FILL(quad, up, false, 1)
#undef METALSIM_SIMD_FILL

template <class T>
METALSIM_ALWAYS_INLINE T simd_broadcast_first(T x, METALSIM_SIMD_LINE) {
  return METALSIM_SIMD_NS::simd_run<T>(&METALSIM_SIMD_NS::resolve_shuffle<T, METALSIM_SIMD_NS::Shuffle::First>,
                                       x, 0, 0, line_);
}
template <class T>
METALSIM_ALWAYS_INLINE T quad_broadcast_first(T x, METALSIM_SIMD_LINE) {
  return METALSIM_SIMD_NS::simd_run<T>(&METALSIM_SIMD_NS::resolve_shuffle<T, METALSIM_SIMD_NS::Shuffle::First>,
                                       x, 0, 1, line_);
}

// Votes.
METALSIM_ALWAYS_INLINE bool simd_all(bool x, METALSIM_SIMD_LINE) {
  return METALSIM_SIMD_NS::simd_run<bool>(&METALSIM_SIMD_NS::resolve_all, x, 0, 0, line_);
}
METALSIM_ALWAYS_INLINE bool simd_any(bool x, METALSIM_SIMD_LINE) {
  return METALSIM_SIMD_NS::simd_run<bool>(&METALSIM_SIMD_NS::resolve_any, x, 0, 0, line_);
}
METALSIM_ALWAYS_INLINE bool quad_all(bool x, METALSIM_SIMD_LINE) {
  return METALSIM_SIMD_NS::simd_run<bool>(&METALSIM_SIMD_NS::resolve_all, x, 0, 1, line_);
}
METALSIM_ALWAYS_INLINE bool quad_any(bool x, METALSIM_SIMD_LINE) {
  return METALSIM_SIMD_NS::simd_run<bool>(&METALSIM_SIMD_NS::resolve_any, x, 0, 1, line_);
}
METALSIM_ALWAYS_INLINE simd_vote simd_ballot(bool x, METALSIM_SIMD_LINE) {
  return simd_vote(METALSIM_SIMD_NS::simd_run<uint64_t>(&METALSIM_SIMD_NS::resolve_ballot, x, 0, 0, line_));
}
METALSIM_ALWAYS_INLINE simd_vote simd_active_threads_mask(METALSIM_SIMD_LINE) {
  const bool unused = true;
  return simd_vote(METALSIM_SIMD_NS::simd_run<uint64_t>(&METALSIM_SIMD_NS::resolve_active_mask, unused, 0, 0, line_));
}
METALSIM_ALWAYS_INLINE bool simd_is_first(METALSIM_SIMD_LINE) {
  const bool unused = true;
  return METALSIM_SIMD_NS::simd_run<bool>(&METALSIM_SIMD_NS::resolve_is_first, unused, 0, 0, line_);
}
METALSIM_ALWAYS_INLINE bool quad_is_first(METALSIM_SIMD_LINE) {
  const bool unused = true;
  return METALSIM_SIMD_NS::simd_run<bool>(&METALSIM_SIMD_NS::resolve_is_first, unused, 0, 1, line_);
}

#undef METALSIM_SIMD_LINE
#undef METALSIM_SIMD_NS

}  // namespace metal
