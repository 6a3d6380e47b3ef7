// The elementwise launcher (see elementwise.h).
#include "launch/elementwise.h"

#include <ATen/ATen.h>
#include <c10/util/Half.h>
#include <c10/util/BFloat16.h>

#include <cstring>

#include "allocator.h"
#include "buffer_ref.h"
#include "core/stream_pool.h"
#include "launch/elementwise_params.h"
#include "launch/torch_dtype.h"

namespace metalx::launch {
namespace {

constexpr uint32_t kThreadsPerGroup = 256;

// Elements per thread. A GPU thread does a few (enough to amortise the index math, few
// enough that a dispatch fills the machine); a simulated thread is a loop iteration on
// a CPU core, where longer runs vectorise and amortise the per-thread call.
uint32_t elementsPerThread(Stream& stream) { return stream.device().info().is_simulated ? 64 : 4; }

// The dense variants on the simulator: a thread's run grows with the tensor, from 64 up
// to 1024 elements, keeping at least kSimDenseGroups threadgroups. A simulated thread
// costs a call and its setup (the op's constants broadcast into vector registers, the
// remainder checks): at 64 floats that is 4 AVX-512 iterations and the setup took as
// many instructions as relu's loop. 16 groups still let the pool's threads balance
// (the simulator hands out groups in chunks, 8 per pool thread on 2 cores).
constexpr uint64_t kSimDenseGroups = 16;
uint32_t denseElementsPerThread(Stream& stream, uint64_t numel) {
  uint32_t per_thread = elementsPerThread(stream);
  if (!stream.device().info().is_simulated) return per_thread;
  while (per_thread < 1024 && numel / (uint64_t(per_thread) * 2 * kThreadsPerGroup) >= kSimDenseGroups) per_thread *= 2;
  return per_thread;
}

bool isFloating(c10::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

// The op's scalars in both forms (the kernel reads the one of its compute type). Values
// a float cannot hold become inf, as CPU's conversion of an op's float arguments does.
// complex64 kernels read scalar n as (f[2n], f[2n+1]) = (real, imag).
OpScalars toOpScalars(c10::ArrayRef<at::Scalar> scalars, c10::ScalarType kernel_dtype) {
  OpScalars k;
  if (kernel_dtype == at::kComplexFloat) {
    TORCH_INTERNAL_ASSERT(scalars.size() <= 2, "at most 2 scalars per complex elementwise op");
    for (size_t n = 0; n < scalars.size(); ++n) {
      const c10::complex<double> z = scalars[n].toComplexDouble();
      k.f[2 * n] = static_cast<float>(z.real());
      k.f[2 * n + 1] = static_cast<float>(z.imag());
    }
    return k;
  }
  TORCH_INTERNAL_ASSERT(scalars.size() <= 4, "at most 4 scalars per elementwise op");
  for (size_t n = 0; n < scalars.size(); ++n) {
    const at::Scalar& s = scalars[n];
    if (s.isFloatingPoint()) {
      const double d = s.toDouble();
      k.f[n] = static_cast<float>(d);
      k.i[n] = std::isfinite(d) && std::abs(d) < 9.2e18 ? static_cast<int64_t>(d) : 0;
    } else if (s.isBoolean()) {
      k.f[n] = s.toBool() ? 1.0f : 0.0f;
      k.i[n] = s.toBool() ? 1 : 0;
    } else {
      TORCH_CHECK(!s.isComplex(), "metalx: complex scalar arguments need the CPU path");
      k.i[n] = s.toLong();
      k.f[n] = static_cast<float>(k.i[n]);
    }
  }
  return k;
}

// The value of CPU scalar operand `arg` as `dtype`'s bit pattern.
uint64_t scalarBits(at::TensorIteratorBase& iter, int arg, c10::ScalarType dtype) {
  uint64_t bits = 0;
  auto put = [&](auto v) { std::memcpy(&bits, &v, sizeof v); };
  switch (dtype) {
    case at::kFloat: put(iter.scalar_value<float>(arg)); break;
    case at::kHalf: put(iter.scalar_value<c10::Half>(arg)); break;
    case at::kBFloat16: put(iter.scalar_value<c10::BFloat16>(arg)); break;
    case at::kLong: put(iter.scalar_value<int64_t>(arg)); break;
    case at::kInt: put(iter.scalar_value<int32_t>(arg)); break;
    case at::kShort: put(iter.scalar_value<int16_t>(arg)); break;
    case at::kChar: put(iter.scalar_value<int8_t>(arg)); break;
    case at::kByte: put(iter.scalar_value<uint8_t>(arg)); break;
    case at::kBool: put(iter.scalar_value<bool>(arg)); break;
    case at::kComplexFloat: put(iter.scalar_value<c10::complex<float>>(arg)); break;
    default: TORCH_INTERNAL_ASSERT(false, "metalx: no elementwise kernel for ", dtype);
  }
  return bits;
}

enum class Layout { Dense, Scalar, Other };

Layout layoutOf(const at::TensorIteratorBase& iter, int arg) {
  if (arg >= iter.noutputs() && iter.is_cpu_scalar(arg)) return Layout::Scalar;
  const auto shape = iter.shape();
  const auto strides = iter.strides(arg);
  const int64_t element = iter.element_size(arg);
  int64_t expected = element;
  bool dense = true, all_zero = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (strides[d] != 0) all_zero = false;
    if (strides[d] != expected) dense = false;
    expected *= shape[d];
  }
  if (dense) return Layout::Dense;
  return all_zero && arg >= iter.noutputs() ? Layout::Scalar : Layout::Other;
}

// One operand as the kernel sees it: a device buffer, or a CPU scalar's bits inline.
// Filled in place and never copied: `buffer` may point at `holder`.
struct Operand {
  const rt::BufferPtr* buffer = nullptr;  // the storage's own reference (bufferRefFor), or &holder
  rt::BufferPtr holder;
  size_t offset = 0;
  uint64_t inline_bits = 0;
  size_t inline_size = 0;  // > 0: bind inline_bits
  Operand() = default;
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;
  void setTensor(const at::Tensor& t) { buffer = &bufferRefFor(t, &offset, &holder); }
};

// `dtype`: the type the kernel reads this operand as.
void setOperand(Operand& o, at::TensorIteratorBase& iter, int arg, c10::ScalarType dtype) {
  if (arg >= iter.noutputs() && iter.is_cpu_scalar(arg)) {
    o.inline_bits = scalarBits(iter, arg, dtype);
    o.inline_size = c10::elementSize(dtype);
    return;
  }
  o.setTensor(iter.tensor(arg));
}

// One dispatch: the operands at [[buffer(0..n-1)]], then the op's scalars and the shape.
void encode(Stream& stream, const rt::ComputePipelinePtr& pipeline, const Operand* operands, int n,
            const OpScalars& op_scalars, const void* shape, size_t shape_bytes, uint64_t threads) {
  rt::ComputeEncoder::Argument args[kElementwiseMaxOperands + 2];
  for (int arg = 0; arg < n; ++arg) {
    const Operand& o = operands[arg];
    if (o.inline_size) args[arg].bytes = &o.inline_bits, args[arg].length = o.inline_size;
    else args[arg].buffer = o.buffer, args[arg].offset = o.offset;
  }
  args[n].bytes = &op_scalars, args[n].length = sizeof op_scalars;
  args[n + 1].bytes = shape, args[n + 1].length = shape_bytes;
  stream.encodeCompute([&](rt::ComputeEncoder& e) {
    e.encodeDispatchThreads(pipeline, args, static_cast<uint32_t>(n + 2), {threads, 1, 1},
                            {std::min<uint64_t>(threads, kThreadsPerGroup), 1, 1});
  });
}

// Encodes one launch of `pipeline` over `iter`'s iteration space: the dense variants
// as one run of elements, the strided ones with the iterator's sizes and strides.
// `operands` are bound in order; those past the iterator's tensors (a _vm kernel's one
// value) have no strides.
void dispatch(at::TensorIteratorBase& iter, Stream& stream, const rt::ComputePipelinePtr& pipeline, Variant variant,
              const Operand* operands, int noperands, const OpScalars& op_scalars) {
  const bool strided = variant == Variant::Strided || variant == Variant::Strided64 ||
                       variant == Variant::StridedOpmathB || variant == Variant::Strided64OpmathB;
  if (!strided) {
    const uint32_t per_thread = denseElementsPerThread(stream, static_cast<uint64_t>(iter.numel()));
    const DenseShape shape{static_cast<uint64_t>(iter.numel()), per_thread};
    const uint64_t threads = (shape.count + per_thread - 1) / per_thread;
    encode(stream, pipeline, operands, noperands, op_scalars, &shape, sizeof shape, threads);
    return;
  }

  StridedShape shape{};
  const auto sizes = iter.shape();
  shape.ndim = static_cast<uint32_t>(std::max<size_t>(sizes.size(), 1));
  shape.chunk = elementsPerThread(stream);
  uint64_t rows = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    shape.sizes[d] = static_cast<uint64_t>(sizes[d]);
    if (d > 0) rows *= shape.sizes[d];
  }
  if (sizes.empty()) shape.sizes[0] = 1;
  for (int arg = 0; arg < iter.ntensors(); ++arg) {
    if (operands[arg].inline_size) continue;  // a CPU scalar: stride 0
    const auto strides = iter.strides(arg);
    const int64_t element = iter.element_size(arg);
    for (size_t d = 0; d < sizes.size(); ++d) shape.strides[arg][d] = static_cast<uint64_t>(strides[d] / element);
  }
  shape.chunks0 = (shape.sizes[0] + shape.chunk - 1) / shape.chunk;
  shape.items = shape.chunks0 * rows;
  // Grid-stride beyond this many threads: plenty to fill any GPU.
  const uint64_t threads = std::min<uint64_t>(shape.items, uint64_t(1) << 24);
  encode(stream, pipeline, operands, noperands, op_scalars, &shape, sizeof shape, threads);
}

bool isReducedFloat(c10::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

// CPU's mul and div of a half or bfloat tensor by one value (a Python number, a 0-dim
// tensor, or any single value broadcast) read that value in float from its own dtype
// (TensorIteratorBase::original_scalar_value<opmath_t>) and round once, at the end;
// rounding it to the tensor's dtype first, as the other binary ops do, gives other
// results (x * 0.1 multiplies by 0.1f, not by bfloat16(0.1)). The _vm kernels take it so.
void runWithOpmathScalarB(at::TensorIteratorBase& iter, KernelFamily& kernels, const ElementwiseOptions& options,
                          c10::ScalarType kernel_dtype) {
  const at::Tensor& out = iter.output(0);
  const at::Device device = out.device();
  // The value, in float: a CPU one inline; a device one converted there (no sync).
  Operand operands[3];
  Operand& value = operands[2];
  at::Tensor value_tensor;
  if (iter.is_cpu_scalar(2)) {
    const float v = iter.scalar_value<float>(2);
    std::memcpy(&value.inline_bits, &v, sizeof v);
    value.inline_size = sizeof v;
  } else {
    const at::Tensor& b = iter.input(1);
    value_tensor = b.as_strided({}, {}, b.storage_offset()).to(at::kFloat);
    value.setTensor(value_tensor);
  }
  // The tensor operand in the kernel dtype (a CPU one moved over), and an output of it.
  at::Tensor a = iter.input(0);
  if (iter.is_cpu_scalar(1)) a = a.to(device);
  if (a.scalar_type() != kernel_dtype) a = a.to(kernel_dtype);
  at::Tensor tmp_out = out.scalar_type() == kernel_dtype ? out : at::empty(out.sizes(), out.options().dtype(kernel_dtype));
  auto build = [&](const at::Tensor& o, const at::Tensor& x) {
    at::TensorIteratorConfig config;
    config.set_check_mem_overlap(false).check_all_same_dtype(false).resize_outputs(false).add_output(o).add_const_input(x);
    return config.build();
  };
  at::TensorIterator unary = build(tmp_out, a);
  if (unary.ndim() > kElementwiseMaxDims) {
    if (!tmp_out.is_contiguous()) tmp_out = at::empty(out.sizes(), out.options().dtype(kernel_dtype));
    a = a.expand(out.sizes()).contiguous();
    unary = build(tmp_out, a);
  }
  const bool dense = layoutOf(unary, 0) == Layout::Dense && layoutOf(unary, 1) == Layout::Dense;
  const Variant variant = dense ? Variant::DenseOpmathB
                                : unary.can_use_32bit_indexing() ? Variant::StridedOpmathB : Variant::Strided64OpmathB;
  Stream& stream = currentStream(device.index());
  const rt::ComputePipelinePtr& pipeline = kernels.pipeline(stream, variant, *kernelDtypeFor(kernel_dtype, kernels));
  setOperand(operands[0], unary, 0, kernel_dtype);
  setOperand(operands[1], unary, 1, kernel_dtype);
  dispatch(unary, stream, pipeline, variant, operands, 3, toOpScalars(options.scalars, kernel_dtype));
  if (!tmp_out.is_same(out)) const_cast<at::Tensor&>(out).copy_(tmp_out);
}

// Normalises `iter` so that every tensor input has the kernel dtype and the output the
// kernel's result dtype, then runs on that.
void runWithCasts(at::TensorIteratorBase& iter, KernelFamily& kernels, const ElementwiseOptions& options,
                  c10::ScalarType kernel_dtype, c10::ScalarType result_dtype, bool contiguous) {
  const at::Tensor& out = iter.output(0);
  at::Tensor tmp_out = out;
  if (out.scalar_type() != result_dtype || (contiguous && !out.is_contiguous()))
    tmp_out = at::empty(out.sizes(), out.options().dtype(result_dtype));
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(false)
      .check_all_same_dtype(false)
      .resize_outputs(false)
      .allow_cpu_scalars(true)
      .add_output(tmp_out);
  std::vector<at::Tensor> inputs;
  inputs.reserve(iter.ninputs());
  for (int i = 0; i < iter.ninputs(); ++i) {
    const int arg = iter.noutputs() + i;
    at::Tensor t = iter.input(i);
    if (!iter.is_cpu_scalar(arg)) {
      if (i >= options.first_typed_input && t.scalar_type() != kernel_dtype) t = t.to(kernel_dtype);
      if (contiguous) t = t.expand(out.sizes()).contiguous();
    }
    inputs.push_back(std::move(t));
  }
  for (const at::Tensor& t : inputs) config.add_const_input(t);
  at::TensorIterator normalised = config.build();
  ElementwiseOptions typed = options;
  typed.dtype = kernel_dtype;
  runElementwise(normalised, kernels, typed);
  if (!tmp_out.is_same(out)) const_cast<at::Tensor&>(out).copy_(tmp_out);
}

}  // namespace

std::optional<DType> kernelDtype(c10::ScalarType t) {
  // Compute kernels have no float64 (Metal has no double), so no complex128 either;
  // complex64 is two floats (kernels/complex.h).
  const std::optional<DType> d = storageDtype(t);
  if (!d || *d == DType::Float64 || *d == DType::Complex128) return std::nullopt;
  return d;
}

std::optional<DType> kernelDtypeFor(c10::ScalarType t, const KernelFamily& kernels) {
  if (t == c10::ScalarType::Double && kernels.supports(DType::Float64)) return DType::Float64;
  return kernelDtype(t);
}

c10::ScalarType elementwiseDtype(const at::TensorIteratorBase& iter, int first_typed_input,
                                 std::optional<c10::ScalarType> known) {
  if (known) return *known;
  // The dtype torch computes in, when the iterator inferred one (promotion, or inputs
  // that agree); else the first typed input's (where's values after its condition).
  if (first_typed_input == 0) {
    if (auto common = iter.maybe_common_dtype()) return *common;
  }
  for (int i = first_typed_input; i < iter.ninputs(); ++i) {
    const int arg = iter.noutputs() + i;
    if (!iter.is_cpu_scalar(arg)) return iter.dtype(arg);
  }
  return iter.common_dtype();
}

void runElementwise(at::TensorIteratorBase& iter, KernelFamily& kernels, const ElementwiseOptions& options) {
  const int64_t numel = iter.numel();
  if (numel == 0) return;
  TORCH_INTERNAL_ASSERT(iter.noutputs() == 1 && iter.ninputs() >= 1 && iter.ninputs() <= 3,
                        "metalx elementwise kernels take one output and 1-3 inputs");
  const int ninputs = iter.ninputs();
  const c10::ScalarType kernel_dtype = elementwiseDtype(iter, options.first_typed_input, options.dtype);
  const c10::ScalarType result_dtype = kernels.predicate() ? at::kBool : kernel_dtype;
  const std::optional<DType> dtype = kernelDtypeFor(kernel_dtype, kernels);
  TORCH_INTERNAL_ASSERT(dtype && kernels.supports(*dtype), "metalx: no ", kernels.op(), " kernel for ",
                        kernel_dtype);

  if (kernels.opmathScalarB() && ninputs == 2 && isReducedFloat(kernel_dtype) &&
      (iter.is_cpu_scalar(2) || iter.is_scalar(2))) {
    runWithOpmathScalarB(iter, kernels, options, kernel_dtype);
    return;
  }

  bool needs_cast = iter.dtype(0) != result_dtype;
  for (int i = options.first_typed_input; i < ninputs && !needs_cast; ++i) {
    const int arg = iter.noutputs() + i;
    needs_cast = !iter.is_cpu_scalar(arg) && iter.dtype(arg) != kernel_dtype;
  }
  if (needs_cast || iter.ndim() > kElementwiseMaxDims) {
    runWithCasts(iter, kernels, options, kernel_dtype, result_dtype, iter.ndim() > kElementwiseMaxDims);
    return;
  }

  // Pick the variant.
  Layout layouts[kElementwiseMaxOperands];
  int scalars = 0, others = 0;
  for (int arg = 0; arg < iter.ntensors(); ++arg) {
    layouts[arg] = layoutOf(iter, arg);
    scalars += layouts[arg] == Layout::Scalar;
    others += layouts[arg] == Layout::Other;
  }
  Variant variant;
  if (others == 0 && scalars == 0) variant = Variant::Dense;
  else if (others == 0 && scalars == 1 && ninputs == 2)
    variant = layouts[1] == Layout::Scalar ? Variant::DenseScalarA : Variant::DenseScalarB;
  else variant = iter.can_use_32bit_indexing() ? Variant::Strided : Variant::Strided64;

  Stream& stream = currentStream(iter.device(0).index());
  const rt::ComputePipelinePtr& pipeline = kernels.pipeline(stream, variant, *dtype);
  Operand operands[kElementwiseMaxOperands];
  for (int arg = 0; arg < iter.ntensors(); ++arg) {
    const bool typed = arg - iter.noutputs() >= options.first_typed_input;
    setOperand(operands[arg], iter, arg, typed ? kernel_dtype : iter.dtype(arg));
  }
  dispatch(iter, stream, pipeline, variant, operands, iter.ntensors(), toOpScalars(options.scalars, kernel_dtype));
}

}  // namespace metalx::launch
