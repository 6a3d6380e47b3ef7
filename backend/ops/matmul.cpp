// Matrix products as metalx kernels (kernels/matmul.metal): mm, bmm, addmm, baddbmm,
// addbmm, addr on the GEMM kernel; addmv (and mv, which torch builds on it), dot and
// vdot on the matrix-vector kernel. matmul, linear, einsum, outer and autograd reach
// them through torch's composites.
//
// Operands are read in place through their strides (a transposed or batch-strided view
// is just other strides, a broadcast bias stride 0), so no op copies its inputs.
// alpha and beta follow CPU: beta == 0 ignores the bias (NaN included), alpha == 0 or
// an empty K ignores the product. float32, float16 and bfloat16 run natively with
// float32 accumulation; other dtypes run CPU's kernel through the fallback.
#include <ATen/ATen.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/addmm_meta.h>
#include <ATen/ops/addmv_meta.h>
#include <ATen/ops/baddbmm_meta.h>
#include <ATen/ops/bmm_meta.h>
#include <ATen/ops/mm_meta.h>
#include <torch/library.h>

#include <algorithm>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/kernel_table.h"
#include "launch/structured.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"
#include "matmul_params.h"

namespace metalx {
namespace {

using kernels::GemvParams;
using kernels::MatmulParams;

launch::KernelFamily gemm_kernels("matmul_gemm", launch::kFloatTypes);
launch::KernelFamily gemm_narrow_kernels("matmul_gemm_narrow", launch::kFloatTypes);
launch::KernelFamily gemm_skinny_kernels("matmul_gemm_skinny", launch::kFloatTypes);
launch::KernelFamily gemv_kernels("matmul_gemv", launch::kFloatTypes);

// The GEMM kernel for a product's shape class and its block of C per threadgroup
// (matmul.metal): up to 16 rows skinny (8 rows per block, not padded to 64), 17..32
// columns narrow, else square.
struct GemmShape {
  launch::KernelFamily* kernels;
  int64_t rows, cols;
};
GemmShape gemmShape(int64_t M, int64_t N, bool simulated) {
  if (M <= 16) return {&gemm_skinny_kernels, 8, simulated ? 64 : 128};
  if (N <= 32) return {&gemm_narrow_kernels, 64, 32};
  return {&gemm_kernels, 64, 64};
}
// Whether to run C = A @ B as C^T = B^T @ A^T (other strides, the same sums bit for bit):
// when that turns few columns into few rows, for which a smaller block exists.
bool runTransposed(int64_t M, int64_t N) {
  if (M <= 16) return false;
  if (N <= 16) return true;
  return N > 32 && M <= 32;
}

// The dtype's kernel, if every tensor is a metalx tensor of it.
std::optional<kernels::DType> nativeDtype(std::initializer_list<const at::Tensor*> tensors) {
  const c10::ScalarType t = (*tensors.begin())->scalar_type();
  if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16) return std::nullopt;
  for (const at::Tensor* x : tensors)
    if (x->defined() && (x->scalar_type() != t || !x->is_privateuseone())) return std::nullopt;
  return launch::storageDtype(t);
}

template <class... Args>
void fallbackOut(const char* name, const char* overload, const at::Tensor& out, const Args&... args) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  launch::cpuFallbackOut(op, at::ArrayRef<at::Tensor>(&out, 1), args...);
}

// `x` rounded to the dtype `t` (CPU converts alpha and beta to the dtype where its
// kernels compute in it).
float asDtype(float x, c10::ScalarType t) {
  if (t == at::kHalf) return static_cast<float>(static_cast<c10::Half>(x));
  if (t == at::kBFloat16) return static_cast<float>(static_cast<c10::BFloat16>(x));
  return x;
}

bool isSimulated(const at::Tensor& t) { return bufferFor(t).first->device().info().is_simulated; }

// `t`, or `stand_in` when `t` has no elements or is undefined (nothing is read then):
// what is bound for an operand.
const at::Tensor* operand(const at::Tensor& t, const at::Tensor& stand_in) {
  return t.defined() && t.numel() > 0 ? &t : &stand_in;
}

void launchGemv(kernels::DType dtype, const at::Tensor& A, const at::Tensor& x, const at::Tensor& y,
                const at::Tensor& s, float alpha, float beta);

// C[b] = alpha * A[b] @ B[b] + beta * S[b] (or one C = sum over b, reduce_batches), all
// as 3-D (batch, rows, columns) views of any strides. S may be undefined when beta == 0.
void launchGemm(kernels::DType dtype, const at::Tensor& A, const at::Tensor& B, const at::Tensor& C,
                const at::Tensor& S, float alpha, float beta, bool reduce_batches, bool round_terms = false) {
  const int64_t batches = A.size(0), M = A.size(1), K = A.size(2), N = B.size(2);
  if (C.numel() == 0) return;
  const bool has_bias = S.defined() && beta != 0.0f;
  // One product with one column, or one row against a column-major B: a matrix-vector
  // product, on the kernel that reads a row of its matrix contiguously.
  if (batches == 1 && !round_terms && K > 0) {
    if (N == 1 && A.stride(2) == 1) {
      launchGemv(dtype, A[0], B[0].select(1, 0), C[0].select(1, 0), has_bias ? S[0].select(1, 0) : at::Tensor(),
                 alpha, beta);
      return;
    }
    if (M == 1 && B.stride(1) == 1) {
      launchGemv(dtype, B[0].t(), A[0].select(0, 0), C[0].select(0, 0), has_bias ? S[0].select(0, 0) : at::Tensor(),
                 alpha, beta);
      return;
    }
  }
  if (runTransposed(M, N)) {
    launchGemm(dtype, B.transpose(1, 2), A.transpose(1, 2), C.transpose(1, 2), has_bias ? S.transpose(1, 2) : S,
               alpha, beta, reduce_batches, round_terms);
    return;
  }
  MatmulParams p{};
  p.M = M, p.N = N, p.K = K;
  p.a_bs = A.stride(0), p.a_rs = A.stride(1), p.a_cs = A.stride(2);
  p.b_bs = B.stride(0), p.b_rs = B.stride(1), p.b_cs = B.stride(2);
  p.c_bs = C.stride(0), p.c_rs = C.stride(1), p.c_cs = C.stride(2);
  if (S.defined() && beta != 0.0f) p.s_bs = S.stride(0), p.s_rs = S.stride(1), p.s_cs = S.stride(2);
  p.reduce_batches = reduce_batches ? batches : 1;
  p.round_terms = round_terms;
  p.alpha = (K == 0 || batches == 0) ? 0.0f : alpha;
  // CPU scales by beta alone when the product is empty, with beta as the dtype.
  p.beta = (K == 0 || batches == 0) ? asDtype(beta, C.scalar_type()) : beta;
  Stream& stream = currentStream(C.device().index());
  const bool simulated = isSimulated(C);
  const GemmShape shape = gemmShape(M, N, simulated);
  const rt::ComputePipelinePtr& pipeline = shape.kernels->pipeline(stream, launch::Variant::Plain, dtype);
  // The kernel's threads per block (MM_THREADS): four SIMD groups on a GPU; one thread on
  // the simulator, whose lane 0 does a block's work alone (31 more lanes would only add
  // fibers to start and switch).
  const uint64_t threads = simulated ? 1 : 128;
  const uint64_t gx = (N + shape.cols - 1) / shape.cols, gy = (M + shape.rows - 1) / shape.rows;
  const uint64_t gz = reduce_batches ? 1 : batches;
  const at::Tensor& bias = has_bias ? S : C;
  launch::encodeKernel(stream, pipeline, {operand(A, C), operand(B, C), &C, operand(bias, C)}, p,
                       launch::Grid::groups(gx, threads, gy, gz));
}

// y = alpha * A @ x + beta * s for a 2-D A and 1-D x, y, s.
void launchGemv(kernels::DType dtype, const at::Tensor& A, const at::Tensor& x, const at::Tensor& y,
                const at::Tensor& s, float alpha, float beta) {
  const int64_t M = A.size(0), K = A.size(1);
  if (M == 0) return;
  GemvParams p{};
  p.M = M, p.K = K;
  p.a_rs = A.stride(0), p.a_cs = A.stride(1);
  p.x_s = x.stride(0), p.y_s = y.stride(0);
  if (s.defined() && beta != 0.0f) p.s_s = s.stride(0);
  p.alpha = K == 0 ? 0.0f : alpha;
  p.beta = beta;
  Stream& stream = currentStream(y.device().index());
  const rt::ComputePipelinePtr& pipeline = gemv_kernels.pipeline(stream, launch::Variant::Plain, dtype);
  const uint64_t per_group = 64;
  const at::Tensor& bias = s.defined() && beta != 0.0f ? s : y;
  launch::encodeKernel(stream, pipeline, {operand(A, y), operand(x, y), &y, operand(bias, y)}, p,
                       launch::Grid::threads(static_cast<uint64_t>(M), per_group));
}

// The bias of a 2-D product broadcast to (1, M, N) (undefined when beta == 0).
at::Tensor biasAs3d(const at::Tensor& self, const at::Tensor& out, float beta) {
  if (beta == 0.0f) return at::Tensor();
  return self.expand(out.sizes()).unsqueeze(0);
}

// ---- mm, addmm ----

void addmmInto(const at::Tensor& out, const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
               const at::Scalar& beta, const at::Scalar& alpha, bool has_self) {
  const auto dtype = nativeDtype({&out, &m1, &m2, has_self ? &self : &out});
  if (!dtype) {
    if (has_self)
      fallbackOut("aten::addmm", "out", out, self, m1, m2, beta, alpha);
    else
      fallbackOut("aten::mm", "out", out, m1, m2);
    return;
  }
  const float b = has_self ? beta.toFloat() : 0.0f;
  launchGemm(*dtype, m1.unsqueeze(0), m2.unsqueeze(0), out.unsqueeze(0), has_self ? biasAs3d(self, out, b) : at::Tensor(),
             has_self ? alpha.toFloat() : 1.0f, b, false);
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  launch::FunctionalOp<at::meta::structured_mm> op;
  op.meta(self, mat2);
  addmmInto(op.outputs[0], at::Tensor(), self, mat2, 0, 1, false);
  return std::move(op.outputs[0]);
}
at::Tensor& mmOut(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  launch::OutOp<at::meta::structured_mm> op(out);
  op.meta(self, mat2);
  addmmInto(op.maybe_get_output(0), at::Tensor(), self, mat2, 0, 1, false);
  op.finish();
  return out;
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  launch::FunctionalOp<at::meta::structured_addmm> op;
  op.meta(self, m1, m2, beta, alpha);
  addmmInto(op.outputs[0], self, m1, m2, beta, alpha, true);
  return std::move(op.outputs[0]);
}
at::Tensor& addmmOut(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2, const at::Scalar& beta,
                     const at::Scalar& alpha, at::Tensor& out) {
  launch::OutOp<at::meta::structured_addmm> op(out);
  op.meta(self, m1, m2, beta, alpha);
  addmmInto(op.maybe_get_output(0), self, m1, m2, beta, alpha, true);
  op.finish();
  return out;
}
at::Tensor& addmmInplace(at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2, const at::Scalar& beta,
                         const at::Scalar& alpha) {
  launch::InplaceOp<at::meta::structured_addmm> op(self);
  op.meta(self, m1, m2, beta, alpha);
  addmmInto(op.maybe_get_output(0), self, m1, m2, beta, alpha, true);
  op.finish();
  return self;
}

// ---- bmm, baddbmm ----

void baddbmmInto(const at::Tensor& out, const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                 const at::Scalar& beta, const at::Scalar& alpha, bool has_self) {
  const auto dtype = nativeDtype({&out, &b1, &b2, has_self ? &self : &out});
  if (!dtype) {
    if (has_self)
      fallbackOut("aten::baddbmm", "out", out, self, b1, b2, beta, alpha);
    else
      fallbackOut("aten::bmm", "out", out, b1, b2);
    return;
  }
  const float b = has_self ? beta.toFloat() : 0.0f;
  at::Tensor bias = (has_self && b != 0.0f) ? self.expand(out.sizes()) : at::Tensor();
  launchGemm(*dtype, b1, b2, out, bias, has_self ? alpha.toFloat() : 1.0f, b, false);
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  launch::FunctionalOp<at::meta::structured_bmm> op;
  op.meta(self, mat2);
  baddbmmInto(op.outputs[0], at::Tensor(), self, mat2, 0, 1, false);
  return std::move(op.outputs[0]);
}
at::Tensor& bmmOut(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  launch::OutOp<at::meta::structured_bmm> op(out);
  op.meta(self, mat2);
  baddbmmInto(op.maybe_get_output(0), at::Tensor(), self, mat2, 0, 1, false);
  op.finish();
  return out;
}
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                   const at::Scalar& alpha) {
  launch::FunctionalOp<at::meta::structured_baddbmm> op;
  op.meta(self, b1, b2, beta, alpha);
  baddbmmInto(op.outputs[0], self, b1, b2, beta, alpha, true);
  return std::move(op.outputs[0]);
}
at::Tensor& baddbmmOut(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                       const at::Scalar& alpha, at::Tensor& out) {
  launch::OutOp<at::meta::structured_baddbmm> op(out);
  op.meta(self, b1, b2, beta, alpha);
  baddbmmInto(op.maybe_get_output(0), self, b1, b2, beta, alpha, true);
  op.finish();
  return out;
}
at::Tensor& baddbmmInplace(at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                           const at::Scalar& alpha) {
  launch::InplaceOp<at::meta::structured_baddbmm> op(self);
  op.meta(self, b1, b2, beta, alpha);
  baddbmmInto(op.maybe_get_output(0), self, b1, b2, beta, alpha, true);
  op.finish();
  return self;
}

// ---- addbmm: the batches' products summed into one matrix ----

// CPU's checks and output size (addbmm has no meta function).
std::vector<int64_t> checkAddbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2) {
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b1.size(0) == b2.size(0), "batch1 and batch2 must have same number of batches, got ", b1.size(0),
              " and ", b2.size(0));
  TORCH_CHECK(b1.size(2) == b2.size(1), "Incompatible matrix sizes for bmm (", b1.size(1), "x", b1.size(2), " and ",
              b2.size(1), "x", b2.size(2), ")");
  TORCH_CHECK(self.scalar_type() == b1.scalar_type() && b1.scalar_type() == b2.scalar_type(),
              "expected self, batch1 and batch2 to have the same dtype, but got: ", self.scalar_type(), ", ",
              b1.scalar_type(), " and ", b2.scalar_type());
  std::vector<int64_t> size = {b1.size(1), b2.size(2)};
  // self broadcasts to the result (infer_size raises if the sizes are incompatible).
  TORCH_CHECK(at::IntArrayRef(at::infer_size(self.sizes(), size)) == at::IntArrayRef(size), "The expanded size of the tensor (", self.sizes(),
              ") must match the existing size (", at::IntArrayRef(size), ")");
  return size;
}

void addbmmInto(const at::Tensor& out, const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                const at::Scalar& beta, const at::Scalar& alpha) {
  const auto dtype = nativeDtype({&out, &b1, &b2, &self});
  if (!dtype) {
    fallbackOut("aten::addbmm", "out", out, self, b1, b2, beta, alpha);
    return;
  }
  const float b = beta.toFloat();
  if (out.scalar_type() == at::kFloat || b1.size(0) <= 1) {
    launchGemm(*dtype, b1, b2, out.unsqueeze(0), biasAs3d(self, out, b), alpha.toFloat(), b, true);
    return;
  }
  // half and bfloat16: CPU adds one batch's product at a time, rounding the sum to the
  // dtype after each (an addmm per batch); the results differ by more than an ulp
  // from one rounding at the end, so do the same.
  at::Tensor o = out.unsqueeze(0);
  launchGemm(*dtype, b1.narrow(0, 0, 1), b2.narrow(0, 0, 1), o, biasAs3d(self, out, b), alpha.toFloat(), b, false);
  for (int64_t i = 1; i < b1.size(0); ++i)
    launchGemm(*dtype, b1.narrow(0, i, 1), b2.narrow(0, i, 1), o, o, alpha.toFloat(), 1.0f, false);
}

at::Tensor& addbmmOut(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  const auto size = checkAddbmm(self, b1, b2);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ", self.scalar_type(),
              ", but got ", out.scalar_type(), " instead");
  at::native::resize_output(out, size);
  if (out.is_contiguous() && !out.is_same(self)) {
    addbmmInto(out, self, b1, b2, beta, alpha);
  } else {
    at::Tensor tmp = at::empty(size, out.options());
    addbmmInto(tmp, self, b1, b2, beta, alpha);
    out.copy_(tmp);
  }
  return out;
}
at::Tensor addbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                  const at::Scalar& alpha) {
  const auto size = checkAddbmm(self, b1, b2);
  at::Tensor out = at::empty(size, self.options());
  addbmmInto(out, self, b1, b2, beta, alpha);
  return out;
}
at::Tensor& addbmmInplace(at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                          const at::Scalar& alpha) {
  const auto size = checkAddbmm(self, b1, b2);
  TORCH_CHECK(self.sizes() == at::IntArrayRef(size), "addbmm_: self must have the size of the result ",
              at::IntArrayRef(size), ", got ", self.sizes());
  // The kernel reads each bias element before writing it, in the same thread.
  addbmmInto(self, self, b1, b2, beta, alpha);
  return self;
}

// ---- addr: beta * self + alpha * outer(vec1, vec2), a GEMM with K = 1 ----

std::vector<int64_t> checkAddr(const at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2) {
  TORCH_CHECK(v1.dim() == 1 && v2.dim() == 1, "addr: Expected 1-D argument vec1, but got ", v1.dim(), "-D");
  std::vector<int64_t> size = {v1.size(0), v2.size(0)};
  TORCH_CHECK(at::IntArrayRef(at::infer_size(self.sizes(), size)) == at::IntArrayRef(size), "The expanded size of the tensor (", self.sizes(),
              ") must match the existing size (", at::IntArrayRef(size), ")");
  return size;
}

void addrInto(const at::Tensor& out, const at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2,
              const at::Scalar& beta, const at::Scalar& alpha) {
  const auto dtype = nativeDtype({&out, &v1, &v2, &self});
  if (!dtype) {
    fallbackOut("aten::addr", "out", out, self, v1, v2, beta, alpha);
    return;
  }
  // CPU computes addr in the dtype, one rounding per operation:
  // (beta * self) + ((alpha * vec1) * vec2), alpha and beta as the dtype, and alpha = 0
  // does not drop the product. vec1 is scaled first (native mul), the K = 1 product of
  // two values of the dtype is exact in float, and the kernel rounds both terms.
  const c10::ScalarType t = out.scalar_type();
  const float b = asDtype(beta.toFloat(), t);
  const at::Tensor scaled = at::mul(v1, at::Scalar(static_cast<double>(asDtype(alpha.toFloat(), t))));
  launchGemm(*dtype, scaled.unsqueeze(1).unsqueeze(0), v2.unsqueeze(0).unsqueeze(0), out.unsqueeze(0),
             biasAs3d(self, out, b), 1.0f, b, false, true);
}

at::Tensor addr(const at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2, const at::Scalar& beta,
                const at::Scalar& alpha) {
  const auto size = checkAddr(self, v1, v2);
  const c10::ScalarType t = at::native::result_type({self, v1, v2});
  at::Tensor out = at::empty(size, self.options().dtype(t));
  if (self.scalar_type() == t && v1.scalar_type() == t && v2.scalar_type() == t) {
    addrInto(out, self, v1, v2, beta, alpha);
  } else {
    fallbackOut("aten::addr", "out", out, self, v1, v2, beta, alpha);
  }
  return out;
}
at::Tensor& addrOut(const at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2, const at::Scalar& beta,
                    const at::Scalar& alpha, at::Tensor& out) {
  const auto size = checkAddr(self, v1, v2);
  const bool same = out.scalar_type() == self.scalar_type() && v1.scalar_type() == self.scalar_type() &&
                    v2.scalar_type() == self.scalar_type();
  if (!same) {
    fallbackOut("aten::addr", "out", out, self, v1, v2, beta, alpha);
    return out;
  }
  at::native::resize_output(out, size);
  if (!out.is_same(self) && !out.is_same(v1) && !out.is_same(v2)) {
    addrInto(out, self, v1, v2, beta, alpha);
  } else {
    at::Tensor tmp = at::empty(size, out.options());
    addrInto(tmp, self, v1, v2, beta, alpha);
    out.copy_(tmp);
  }
  return out;
}
at::Tensor& addrInplace(at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2, const at::Scalar& beta,
                        const at::Scalar& alpha) {
  const auto size = checkAddr(self, v1, v2);
  TORCH_CHECK(self.sizes() == at::IntArrayRef(size), "addr_: self must have the size of the result ",
              at::IntArrayRef(size), ", got ", self.sizes());
  if (self.scalar_type() == v1.scalar_type() && self.scalar_type() == v2.scalar_type()) {
    addrInto(self, self, v1, v2, beta, alpha);
  } else {
    at::Tensor tmp = at::empty(size, self.options());
    fallbackOut("aten::addr", "out", tmp, self, v1, v2, beta, alpha);
    self.copy_(tmp);
  }
  return self;
}

// ---- addmv (mv is torch's composite over addmv_), dot, vdot ----

void addmvInto(const at::Tensor& out, const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
               const at::Scalar& beta, const at::Scalar& alpha) {
  const float b = beta.toFloat();
  const auto dtype = nativeDtype({&out, &mat, &vec, b != 0.0f ? &self : &out});
  if (!dtype) {
    fallbackOut("aten::addmv", "out", out, self, mat, vec, beta, alpha);
    return;
  }
  const at::Tensor bias = b != 0.0f ? self.expand(out.sizes()) : at::Tensor();
  // CPU's gemv takes alpha and beta as the dtype.
  launchGemv(*dtype, mat, vec, out, bias, asDtype(alpha.toFloat(), out.scalar_type()),
             asDtype(b, out.scalar_type()));
}

at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  launch::FunctionalOp<at::meta::structured_addmv> op;
  op.meta(self, mat, vec, beta, alpha);
  addmvInto(op.outputs[0], self, mat, vec, beta, alpha);
  return std::move(op.outputs[0]);
}
at::Tensor& addmvOut(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                     const at::Scalar& alpha, at::Tensor& out) {
  launch::OutOp<at::meta::structured_addmv> op(out);
  op.meta(self, mat, vec, beta, alpha);
  addmvInto(op.maybe_get_output(0), self, mat, vec, beta, alpha);
  op.finish();
  return out;
}
at::Tensor& addmvInplace(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                         const at::Scalar& alpha) {
  launch::InplaceOp<at::meta::structured_addmv> op(self);
  op.meta(self, mat, vec, beta, alpha);
  addmvInto(op.maybe_get_output(0), self, mat, vec, beta, alpha);
  op.finish();
  return self;
}

// CPU's checks for dot and vdot.
void checkDot(const char* name, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ", b.dim(),
              "D tensors");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), name, " : expected both vectors to have same dtype, but found ",
              a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(),
              "] and src [", b.numel(), "] to have the same number of elements, but got ", a.numel(), " and ",
              b.numel(), " elements respectively");
}

at::Tensor dotLike(const char* name, const at::Tensor& a, const at::Tensor& b) {
  checkDot(name, a, b);
  at::Tensor out = at::empty({}, a.options());
  const auto dtype = nativeDtype({&a, &b});
  if (!dtype) {
    fallbackOut(std::string("aten::").append(name).c_str(), "out", out, a, b);
    return out;
  }
  launchGemv(*dtype, a.unsqueeze(0), b, out.unsqueeze(0), at::Tensor(), 1.0f, 0.0f);
  return out;
}
at::Tensor dot(const at::Tensor& a, const at::Tensor& b) { return dotLike("dot", a, b); }
at::Tensor vdot(const at::Tensor& a, const at::Tensor& b) { return dotLike("vdot", a, b); }

at::Tensor& dotLikeOut(const char* name, const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  at::Tensor r = dotLike(name, a, b);
  TORCH_CHECK(out.scalar_type() == r.scalar_type(), "Expected out tensor to have dtype ", r.scalar_type(),
              ", but got ", out.scalar_type(), " instead");
  at::native::resize_output(out, {});
  out.copy_(r);
  return out;
}
at::Tensor& dotOut(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) { return dotLikeOut("dot", a, b, out); }
at::Tensor& vdotOut(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return dotLikeOut("vdot", a, b, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", TORCH_FN(mm));
  m.impl("mm.out", TORCH_FN(mmOut));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmmOut));
  m.impl("addmm_", TORCH_FN(addmmInplace));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("bmm.out", TORCH_FN(bmmOut));
  m.impl("baddbmm", TORCH_FN(baddbmm));
  m.impl("baddbmm.out", TORCH_FN(baddbmmOut));
  m.impl("baddbmm_", TORCH_FN(baddbmmInplace));
  m.impl("addbmm", TORCH_FN(addbmm));
  m.impl("addbmm.out", TORCH_FN(addbmmOut));
  m.impl("addbmm_", TORCH_FN(addbmmInplace));
  m.impl("addr", TORCH_FN(addr));
  m.impl("addr.out", TORCH_FN(addrOut));
  m.impl("addr_", TORCH_FN(addrInplace));
  m.impl("addmv", TORCH_FN(addmv));
  m.impl("addmv.out", TORCH_FN(addmvOut));
  m.impl("addmv_", TORCH_FN(addmvInplace));
  m.impl("dot", TORCH_FN(dot));
  m.impl("dot.out", TORCH_FN(dotOut));
  m.impl("vdot", TORCH_FN(vdot));
  m.impl("vdot.out", TORCH_FN(vdotOut));
}

}  // namespace
}  // namespace metalx
