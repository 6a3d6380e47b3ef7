// Fused scaled dot-product attention (kernels/attention.metal), selected through torch's
// SDPA dispatch: _fused_sdp_choice answers "overrideable" for the shapes the kernels
// cover, and torch then calls _scaled_dot_product_fused_attention_overrideable, whose
// autograd formula calls the _backward op below. Everything else takes torch's math
// path, which runs on the native matmul and softmax.
//
// Covered: 4-D float32/float16/bfloat16 metalx q, k, v of one dtype, head dims up to
// kMaxHeadDim (two tile classes: up to 64, and up to 128 on smaller blocks), equal
// batch, key and value heads equal, query heads equal to them or (enable_gqa) a
// multiple; an additive mask of the query's dtype broadcastable to [B, Hq, L, S] (torch
// converts boolean masks to -inf/0 before the call), causal, dropout, any scale. Inputs
// are read through their strides, never copied.
//
// Contract with autograd (torch's derivatives.yaml): the forward returns the output,
// the rows' logsumexp [B, Hq, L] in float32, empty cum_seq tensors, max_q = L,
// max_k = S, and the Philox seed and offset (CPU int64 scalars) the dropout mask was
// drawn with; the backward gets all of them back and regenerates the same mask. With
// return_debug_mask the forward also returns the dropout keep mask [B, Hq, L, S]
// (1 kept, 0 dropped) in the query's dtype.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>

#include "allocator.h"
#include "attention_params.h"
#include "core/stream_pool.h"
#include "device.h"
#include "generator.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"
#include "metalx/runtime/env.h"

namespace metalx {
namespace {

using kernels::AttentionParams;

// The kernels' two tile classes (at_blocks_for in attention.metal): head dims up to 64,
// and up to kMaxHeadDim on smaller blocks so that the staged tiles fit threadgroup memory.
struct TileClass {
  int64_t max_head_dim;
  int64_t forward_rows, keys, backward_rows;  // at_blocks: bq, bk, bqb
  launch::KernelFamily& forward;
  launch::KernelFamily& backward_kv;
  launch::KernelFamily& backward_q;
};

launch::KernelFamily forward_kernels("attention_forward", launch::kFloatTypes);
launch::KernelFamily backward_kv_kernels("attention_backward_kv", launch::kFloatTypes);
launch::KernelFamily backward_q_kernels("attention_backward_q", launch::kFloatTypes);
launch::KernelFamily forward_wide_kernels("attention_forward_wide", launch::kFloatTypes);
launch::KernelFamily backward_kv_wide_kernels("attention_backward_kv_wide", launch::kFloatTypes);
launch::KernelFamily backward_q_wide_kernels("attention_backward_q_wide", launch::kFloatTypes);

constexpr int64_t kMaxHeadDim = 128;
constexpr uint64_t kThreads = 32;  // one SIMD group per threadgroup

// The class covering head dims d (query/key) and dv (value).
const TileClass& tileClass(int64_t d, int64_t dv) {
  static const TileClass narrow{64, 32, 32, 16, forward_kernels, backward_kv_kernels, backward_q_kernels};
  static const TileClass wide{kMaxHeadDim, 16, 16, 8, forward_wide_kernels, backward_kv_wide_kernels,
                              backward_q_wide_kernels};
  return std::max(d, dv) <= narrow.max_head_dim ? narrow : wide;
}

bool isFloatType(c10::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; }

// Whether `mask` broadcasts to [B, H, L, S] (torch's broadcasting: aligned at the end).
bool broadcastsTo(const at::Tensor& mask, std::array<int64_t, 4> shape) {
  if (mask.dim() > 4) return false;
  for (int64_t d = 0; d < mask.dim(); ++d) {
    const int64_t size = mask.size(mask.dim() - 1 - d), want = shape[3 - d];
    if (size != 1 && size != want) return false;
  }
  return true;
}

// Whether the fused kernels cover this call.
bool fusedCovers(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const std::optional<at::Tensor>& mask, bool is_causal, bool enable_gqa) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  if (q.is_nested() || k.is_nested() || v.is_nested()) return false;
  const c10::ScalarType t = q.scalar_type();
  if (!isFloatType(t) || k.scalar_type() != t || v.scalar_type() != t) return false;
  if (!q.is_privateuseone() || !k.is_privateuseone() || !v.is_privateuseone()) return false;
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), D = q.size(3);
  const int64_t Hk = k.size(1), S = k.size(2);
  if (k.size(0) != B || v.size(0) != B || v.size(1) != Hk || v.size(2) != S || k.size(3) != D) return false;
  if (Hk != Hq && !(enable_gqa && Hk > 0 && Hq % Hk == 0)) return false;
  if (B == 0 || Hq == 0 || L == 0 || S == 0 || D == 0 || v.size(3) == 0) return false;
  if (D > kMaxHeadDim || v.size(3) > kMaxHeadDim) return false;
  if (mask.has_value() && mask->defined()) {
    if (is_causal) return false;  // the math path raises CPU's error
    const at::Tensor& m = *mask;
    if (m.scalar_type() != t && m.scalar_type() != at::kBool) return false;
    if (!m.is_privateuseone() || m.is_nested() || !broadcastsTo(m, {B, Hq, L, S})) return false;
  }
  return true;
}

int64_t fusedSdpChoice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                       std::optional<double> scale, bool enable_gqa) {
  auto& ctx = at::globalContext();
  if (ctx.userEnabledOverrideableSDP() && fusedCovers(q, k, v, mask, is_causal, enable_gqa))
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  return static_cast<int64_t>(at::SDPBackend::error);
}

float scaleOf(const at::Tensor& q, std::optional<double> scale) {
  return static_cast<float>(sdp::calculate_scale(q, scale).expect_float());
}

// METALX_SIM_ATTENTION_GPU_CODE=1: the simulator runs the kernels' GPU code (per-lane
// softmax, SIMD-group matrices, barriers) instead of its lane-0 kernels, so tests keep
// checking the code an Apple GPU runs. Read per call (tests set it around a call).
bool simulatorRunsGpuCode() {
  return withTorchErrors([] { return rt::env::flag("METALX_SIM_ATTENTION_GPU_CODE", false); });
}

// Sizes and strides of q, k, v (and mask, when given) into `p`.
void describeInputs(AttentionParams& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& mask) {
  p.gpu_code = simulatorRunsGpuCode();
  p.B = q.size(0), p.Hq = q.size(1), p.L = q.size(2), p.D = q.size(3);
  p.Hk = k.size(1), p.S = k.size(2), p.Dv = v.size(3);
  p.q_bs = q.stride(0), p.q_hs = q.stride(1), p.q_ls = q.stride(2), p.q_ds = q.stride(3);
  p.k_bs = k.stride(0), p.k_hs = k.stride(1), p.k_ls = k.stride(2), p.k_ds = k.stride(3);
  p.v_bs = v.stride(0), p.v_hs = v.stride(1), p.v_ls = v.stride(2), p.v_ds = v.stride(3);
  if (mask.defined()) {
    const at::Tensor m = mask.expand({p.B, p.Hq, p.L, p.S});
    p.has_mask = 1;
    p.m_bs = m.stride(0), p.m_hs = m.stride(1), p.m_ls = m.stride(2), p.m_ss = m.stride(3);
  }
}

void checkInputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const at::Tensor& mask) {
  const bool is_causal = false;
  TORCH_CHECK(fusedCovers(q, k, v, mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt, is_causal,
                          /*enable_gqa=*/true),
              op, ": metalx's fused attention needs 4-D float32/float16/bfloat16 metalx query, key and value of ",
              "one dtype, head dims at most ", kMaxHeadDim, ", query heads a multiple of key heads and a mask ",
              "broadcastable to [B, Hq, L, S]; got query ", q.sizes(), ", key ", k.sizes(), ", value ", v.sizes());
}

// The mask in the inputs' dtype (a boolean one as -inf/0, as torch's SDPA converts it).
at::Tensor additiveMask(const std::optional<at::Tensor>& mask, const at::Tensor& q) {
  if (!mask.has_value() || !mask->defined()) return at::Tensor();
  if (mask->scalar_type() != at::kBool) return *mask;
  at::Tensor m = at::zeros(mask->sizes(), q.options());
  return m.masked_fill(mask->logical_not(), -std::numeric_limits<double>::infinity());
}

// `t`, or `stand_in` bound in its place when `t` is absent (the kernel does not read it).
const at::Tensor* orStandIn(const at::Tensor& t, const at::Tensor& stand_in) {
  return t.defined() && t.numel() > 0 ? &t : &stand_in;
}

using ForwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt,
                                 at::Tensor, at::Tensor, at::Tensor>;

ForwardResult fusedForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                           bool return_debug_mask, std::optional<double> scale) {
  const at::Tensor mask = additiveMask(attn_bias, q);
  checkInputs("_scaled_dot_product_fused_attention_overrideable", q, k, v, mask);
  TORCH_CHECK(!(is_causal && mask.defined()),
              "_scaled_dot_product_fused_attention_overrideable: an explicit attn_bias cannot be combined with ",
              "is_causal=True");
  TORCH_CHECK(dropout_p >= 0 && dropout_p <= 1, "dropout probability has to be between 0 and 1, but got ", dropout_p);
  AttentionParams p{};
  describeInputs(p, q, k, v, mask);
  p.causal = is_causal;
  p.scale = scaleOf(q, scale);
  p.dropout = static_cast<float>(dropout_p);

  at::Tensor out = at::empty({p.B, p.Hq, p.L, p.Dv}, q.options());
  at::Tensor lse = at::empty({p.B, p.Hq, p.L}, q.options().dtype(at::kFloat));
  p.o_bs = out.stride(0), p.o_hs = out.stride(1), p.o_ls = out.stride(2), p.o_ds = out.stride(3);
  const auto cpu_long = at::TensorOptions().dtype(at::kLong).device(at::kCPU);
  at::Tensor seed = at::zeros({}, cpu_long), offset = at::zeros({}, cpu_long);
  if (dropout_p > 0) {
    auto* g = at::get_generator_or_default<MetalxGeneratorImpl>(std::nullopt, defaultGenerator(q.device().index()));
    MetalxGeneratorImpl::PhiloxInputs in;
    {
      std::lock_guard<std::mutex> lock(g->mutex_);
      in = g->reserve(static_cast<uint64_t>(p.B * p.Hq * p.L * ((p.S + 3) / 4) * 4));
    }
    seed.fill_(static_cast<int64_t>(in.seed));
    offset.fill_(static_cast<int64_t>(in.offset));
    p.seed_lo = static_cast<uint32_t>(in.seed), p.seed_hi = static_cast<uint32_t>(in.seed >> 32);
    p.group0 = in.offset / 4;
  }
  at::Tensor debug;
  if (return_debug_mask) {
    // All kept without dropout; with it the kernel writes every element.
    debug = dropout_p > 0 ? at::empty({p.B, p.Hq, p.L, p.S}, q.options().dtype(at::kFloat))
                          : at::ones({p.B, p.Hq, p.L, p.S}, q.options().dtype(at::kFloat));
    p.debug = dropout_p > 0;
  }

  const auto dtype = launch::storageDtype(q.scalar_type());
  Stream& stream = currentStream(q.device().index());
  const TileClass& tiles = tileClass(p.D, p.Dv);
  const uint64_t gx = (p.L + tiles.forward_rows - 1) / tiles.forward_rows, gy = p.B * p.Hq;
  const at::Tensor no_debug;
  launch::encodeKernel(stream, tiles.forward.pipeline(stream, launch::Variant::Plain, *dtype),
                       {&q, &k, &v, orStandIn(mask, out), &out, &lse, orStandIn(p.debug ? debug : no_debug, lse)}, p,
                       launch::Grid::groups(gx, kThreads, gy));
  const at::Tensor empty = at::empty({0}, q.options().dtype(at::kLong));
  return {out, lse, empty, empty, c10::SymInt(p.L), c10::SymInt(p.S), seed, offset,
          return_debug_mask ? debug.to(q.scalar_type()) : at::empty({0}, q.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fusedBackward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/,
    c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, std::optional<double> scale) {
  const at::Tensor mask = additiveMask(attn_bias.defined() ? std::optional<at::Tensor>(attn_bias) : std::nullopt, q);
  checkInputs("_scaled_dot_product_fused_attention_overrideable_backward", q, k, v, mask);
  AttentionParams p{};
  describeInputs(p, q, k, v, mask);
  TORCH_CHECK(grad_out.dim() == 4 && grad_out.sizes() == out.sizes() && out.size(0) == p.B && out.size(1) == p.Hq &&
                  out.size(2) == p.L && out.size(3) == p.Dv && grad_out.scalar_type() == q.scalar_type() &&
                  out.scalar_type() == q.scalar_type(),
              "_scaled_dot_product_fused_attention_overrideable_backward: grad_out and out must be [B, Hq, L, Dv] ",
              "of the query's dtype");
  TORCH_CHECK(logsumexp.scalar_type() == at::kFloat && logsumexp.sizes() == at::IntArrayRef({p.B, p.Hq, p.L}),
              "_scaled_dot_product_fused_attention_overrideable_backward: logsumexp must be float32 [B, Hq, L]");
  p.causal = is_causal;
  p.scale = scaleOf(q, scale);
  p.dropout = static_cast<float>(dropout_p);
  p.g_bs = grad_out.stride(0), p.g_hs = grad_out.stride(1), p.g_ls = grad_out.stride(2), p.g_ds = grad_out.stride(3);
  if (dropout_p > 0) {
    const uint64_t seed = static_cast<uint64_t>(philox_seed.item<int64_t>());
    p.seed_lo = static_cast<uint32_t>(seed), p.seed_hi = static_cast<uint32_t>(seed >> 32);
    p.group0 = static_cast<uint64_t>(philox_offset.item<int64_t>()) / 4;
  }
  // rowsum(dO * O) per query row, in float32.
  const at::Tensor delta = (grad_out.to(at::kFloat) * out.to(at::kFloat)).sum(-1).contiguous();
  const at::Tensor lse = logsumexp.contiguous();

  const bool want_q = grad_input_mask[0], want_kv = grad_input_mask[1] || grad_input_mask[2];
  const bool want_bias = grad_input_mask[3] && attn_bias.defined();
  at::Tensor grad_q = at::empty({p.B, p.Hq, p.L, p.D}, q.options());
  at::Tensor grad_k = at::empty({p.B, p.Hk, p.S, p.D}, k.options());
  at::Tensor grad_v = at::empty({p.B, p.Hk, p.S, p.Dv}, v.options());
  at::Tensor grad_bias_full = want_bias ? at::zeros({p.B, p.Hq, p.L, p.S}, q.options()) : at::Tensor();
  p.mask_grad = want_bias;

  const auto dtype = launch::storageDtype(q.scalar_type());
  Stream& stream = currentStream(q.device().index());
  // Both backward kernels bind the same inputs (0-6), their two outputs (7, 8) and p (9).
  const auto run = [&](launch::KernelFamily& kernels, const at::Tensor& out0, const at::Tensor& out1,
                       uint64_t gx, uint64_t gy) {
    launch::encodeKernel(stream, kernels.pipeline(stream, launch::Variant::Plain, *dtype),
                         {&q, &k, &v, orStandIn(mask, grad_q), &grad_out, &lse, &delta, orStandIn(out0, grad_q),
                          orStandIn(out1, grad_q)},
                         p, launch::Grid::groups(gx, kThreads, gy));
  };
  const TileClass& tiles = tileClass(p.D, p.Dv);
  if (want_kv) run(tiles.backward_kv, grad_k, grad_v, (p.S + tiles.keys - 1) / tiles.keys, p.B * p.Hk);
  if (want_q || want_bias)
    run(tiles.backward_q, grad_q, grad_bias_full, (p.L + tiles.backward_rows - 1) / tiles.backward_rows,
        p.B * p.Hq);
  // The bias's gradient summed over its broadcast dimensions.
  at::Tensor grad_bias = want_bias ? at::sum_to(grad_bias_full, attn_bias.sizes()) : at::Tensor();
  return {want_q ? grad_q : at::Tensor(), grad_input_mask[1] ? grad_k : at::Tensor(),
          grad_input_mask[2] ? grad_v : at::Tensor(), grad_bias};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(fusedSdpChoice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(fusedForward));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(fusedBackward));
}

}  // namespace

}  // namespace metalx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &metalx::fusedSdpChoice);
}  // namespace at::native
