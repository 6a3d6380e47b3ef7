// complex64 elementwise math: one functor per op over kernels/complex.h, instantiated
// once each with the kernel names of the real dtypes' ops ("<op>_<variant>_complex64"),
// so the ops' registrations (backend/ops/unary.cpp, binary.cpp) find them by dtype.
// Ops whose complex result is a real one (abs, angle) run as real kernels on the
// tensor's (real, imag) view instead and have no kernel here.
#include <metal_stdlib>
#include "complex.h"
#include "elementwise.h"
using namespace metal;

// The op's complex scalar k: the host lays complex scalars out as (f[2k], f[2k+1]).
inline complex64 complex_scalar(constant OpScalars& s, int k) { return complex64(s.f[2 * k], s.f[2 * k + 1]); }

// ---- binary ----

template <typename M> struct cadd_op : elementwise_fn {
  complex64 alpha;
  void load(constant OpScalars& k) { alpha = complex_scalar(k, 0); }
  complex64 operator()(complex64 a, complex64 b) const { return a + cmul(alpha, b); }
};
template <typename M> struct csub_op : elementwise_fn {
  complex64 alpha;
  void load(constant OpScalars& k) { alpha = complex_scalar(k, 0); }
  complex64 operator()(complex64 a, complex64 b) const { return a - cmul(alpha, b); }
};
template <typename M> struct cmul_op : elementwise_fn {
  complex64 operator()(complex64 a, complex64 b) const { return cmul(a, b); }
};
template <typename M> struct cmul_fused_op : elementwise_fn {
  complex64 operator()(complex64 a, complex64 b) const { return cmul_fused(a, b); }
};
template <typename M> struct cdiv_op : elementwise_fn {
  complex64 operator()(complex64 a, complex64 b) const { return cdiv(a, b); }
};
template <typename M> struct ceq_op : predicate_fn {
  bool operator()(complex64 a, complex64 b) const { return a.x == b.x && a.y == b.y; }
};
template <typename M> struct cne_op : predicate_fn {
  bool operator()(complex64 a, complex64 b) const { return a.x != b.x || a.y != b.y; }
};
METALX_BINARY_KERNELS(add, cadd_op, complex64)
METALX_BINARY_KERNELS(sub, csub_op, complex64)
// mul: the dense variants round as CPU's vectorised loop, the strided ones as its
// strided loop (complex.h): one instantiation per variant, as for the other ops.
template [[host_name("mul_dense_complex64")]] kernel decltype(binary_dense<cmul_op, complex64>)
    binary_dense<cmul_op, complex64>;
template [[host_name("mul_dense_sv_complex64")]] kernel decltype(binary_dense_sv<cmul_op, complex64>)
    binary_dense_sv<cmul_op, complex64>;
template [[host_name("mul_dense_vs_complex64")]] kernel decltype(binary_dense_vs<cmul_op, complex64>)
    binary_dense_vs<cmul_op, complex64>;
template [[host_name("mul_strided_complex64")]] kernel decltype(binary_strided<cmul_fused_op, complex64, uint>)
    binary_strided<cmul_fused_op, complex64, uint>;
template [[host_name("mul_strided64_complex64")]] kernel decltype(binary_strided<cmul_fused_op, complex64, ulong>)
    binary_strided<cmul_fused_op, complex64, ulong>;
METALX_BINARY_KERNELS(div_true, cdiv_op, complex64)
METALX_BINARY_KERNELS(eq, ceq_op, complex64)
METALX_BINARY_KERNELS(ne, cne_op, complex64)

// ---- unary ----

#define METALX_COMPLEX_UNARY(NAME, EXPR)                     \
  template <typename M> struct c##NAME##_op : elementwise_fn { \
    complex64 operator()(complex64 z) const { return EXPR; }   \
  };                                                           \
  METALX_UNARY_KERNELS(NAME, c##NAME##_op, complex64)

METALX_COMPLEX_UNARY(neg, -z)
METALX_COMPLEX_UNARY(conj_physical, complex64(z.x, -z.y))
METALX_COMPLEX_UNARY(exp, cexp(z))
METALX_COMPLEX_UNARY(log, clog(z))
METALX_COMPLEX_UNARY(sqrt, csqrt(z))
METALX_COMPLEX_UNARY(rsqrt, cdiv(complex64(1.0f, 0.0f), csqrt(z)))
METALX_COMPLEX_UNARY(reciprocal, cdiv(complex64(1.0f, 0.0f), z))
METALX_COMPLEX_UNARY(sin, csin(z))
METALX_COMPLEX_UNARY(cos, ccos(z))
METALX_COMPLEX_UNARY(sinh, csinh(z))
METALX_COMPLEX_UNARY(cosh, ccosh(z))
METALX_COMPLEX_UNARY(sigmoid, cdiv(complex64(1.0f, 0.0f), complex64(1.0f, 0.0f) + cexp(-z)))
// sgn: z / |z|, and 0 for 0. Named "sign" because sgn's registration shares sign's
// kernels for real dtypes (torch.sign itself refuses complex before any kernel runs).
METALX_COMPLEX_UNARY(sign, (z.x == 0.0f && z.y == 0.0f) ? complex64(0.0f, 0.0f) : z / cabs(z))
