// nn.LSTM on metalx as fused layers (aten::lstm.input), the role cuDNN's RNNs play on
// CUDA and _lstm_mps on MPS.
//
// torch's composite lstm unrolls a layer into two products and a fused cell per time
// step (and as many backward), each waiting on the previous one: ~27 dispatches a step
// of a training step. Here a layer direction is:
//   forward:  one GEMM for the input projections of all time steps (plus both biases),
//             then kernels/lstm.metal's lstm_forward: the whole recurrence in one
//             dispatch, keeping the activated gates and c_t of every step (and
//             h_{t-1}, in training, for the W_hh gradient);
//   backward: lstm_backward, the whole backpropagation through time in one dispatch
//             (the gates' gradients of every step), then GEMMs over all time steps at
//             once for the input's and the weights' gradients and a sum for the biases'.
// Autograd: a torch::autograd::Function at AutogradPrivateUse1. Its backward is not
// differentiable again (like cuDNN's RNN backward): differentiating it raises.
//
// Covered: float32/float16/bfloat16, any number of layers, bidirectional, batch_first,
// with or without biases, dropout between layers (native_dropout), hidden sizes up to
// 512 (the kernels keep up to 8 batch rows of the hidden state in threadgroup memory).
// Everything else (projections, unbatched or empty inputs, mixed dtypes or devices,
// larger hidden sizes, float64) runs torch's composite implementation, as before, with
// its errors for bad arguments. Packed sequences are aten::lstm.data, not handled here.
#include <ATen/ATen.h>
#include <ATen/ops/lstm_native.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "allocator.h"
#include "core/stream_pool.h"
#include "launch/kernel_table.h"
#include "launch/threads.h"
#include "launch/torch_dtype.h"

namespace metalx {
namespace {

using at::Tensor;
using at::TensorList;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kRowsPerGroup = 8;  // batch rows per threadgroup (kernels/lstm.metal)
constexpr int64_t kThreads = 32;
constexpr int64_t kPanel = 64;   // padding of the hidden size and the gate columns
constexpr int64_t kMaxPaddedHidden = 512;

// Mirrors kernels/lstm.metal's LstmParams.
struct LstmParams {
  int64_t T = 0, B = 0, H = 0;
  int64_t HP = 0, G = 0;
  int64_t reverse = 0;
  int64_t seq_ts = 0, seq_bs = 0;
  int64_t has_grad_out = 0, has_grad_hn = 0, has_grad_cn = 0;
  int64_t group_rows = 0;
  int64_t keep_hprev = 0;
  int64_t batch_major = 0;
};
static_assert(sizeof(LstmParams) == 14 * 8, "LstmParams must match the kernel");

launch::KernelFamily forward_kernels("lstm_forward", launch::kFloatTypes);
launch::KernelFamily backward_kernels("lstm_backward", launch::kFloatTypes);

int64_t roundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// The non-tensor arguments of aten::lstm.input.
struct LstmConfig {
  bool has_biases;
  int64_t num_layers;
  double dropout;
  bool train;
  bool bidirectional;
  bool batch_first;
  int64_t directions() const { return bidirectional ? 2 : 1; }
  int64_t paramsPerDirection() const { return has_biases ? 4 : 2; }
  bool dropsBetweenLayers() const { return train && dropout > 0 && num_layers > 1; }
};

bool kernelDtype(const Tensor& t) {
  const auto s = t.scalar_type();
  return s == at::kFloat || s == at::kHalf || s == at::kBFloat16;
}

bool sameKind(const Tensor& t, const Tensor& ref) {
  return t.defined() && t.device() == ref.device() && t.scalar_type() == ref.scalar_type();
}

// Whether the fused layers take this call; otherwise torch's composite runs it.
bool fusedCovers(const Tensor& input, TensorList hx, TensorList params, const LstmConfig& cfg) {
  if (!input.device().is_privateuseone() || input.dim() != 3 || !kernelDtype(input)) return false;
  if (hx.size() != 2 || !sameKind(hx[0], input) || !sameKind(hx[1], input) || hx[0].dim() != 3) return false;
  if (hx[0].sizes() != hx[1].sizes()) return false;  // projections (proj_size) make them differ
  const int64_t D = cfg.directions(), L = cfg.num_layers;
  const int64_t T = input.size(cfg.batch_first ? 1 : 0), B = input.size(cfg.batch_first ? 0 : 1);
  const int64_t I = input.size(2), H = hx[0].size(2);
  if (T == 0 || B == 0 || I == 0 || H == 0 || L < 1 || roundUp(H, kPanel) > kMaxPaddedHidden) return false;
  if (hx[0].sizes() != at::IntArrayRef({L * D, B, H})) return false;
  if (static_cast<int64_t>(params.size()) != L * D * cfg.paramsPerDirection()) return false;
  for (int64_t l = 0; l < L; ++l) {
    const int64_t in = l == 0 ? I : D * H;
    for (int64_t d = 0; d < D; ++d) {
      const Tensor* p = params.data() + (l * D + d) * cfg.paramsPerDirection();
      for (int64_t k = 0; k < cfg.paramsPerDirection(); ++k)
        if (!sameKind(p[k], input)) return false;
      if (p[0].sizes() != at::IntArrayRef({4 * H, in}) || p[1].sizes() != at::IntArrayRef({4 * H, H})) return false;
      if (cfg.has_biases && (p[2].sizes() != at::IntArrayRef({4 * H}) || p[3].sizes() != at::IntArrayRef({4 * H})))
        return false;
    }
  }
  return true;
}

// One layer direction's weights (views into the flat params list).
struct DirectionWeights {
  Tensor w_ih, w_hh, b_ih, b_hh;
};

DirectionWeights weightsOf(TensorList params, const LstmConfig& cfg, int64_t layer, int64_t dir) {
  const Tensor* p = params.data() + (layer * cfg.directions() + dir) * cfg.paramsPerDirection();
  DirectionWeights w{p[0], p[1], Tensor(), Tensor()};
  if (cfg.has_biases) w.b_ih = p[2], w.b_hh = p[3];
  return w;
}

// Threadgroups for a batch of B rows: one per 8 rows, but at least two for a batch of
// two rows or more. The recurrence is sequential in time, so a batch of 16 rows or
// fewer in one group would run on one GPU core (on the simulator, one of its two worker
// threads) while the others idle; rows are independent, so the split changes no result.
int64_t groupCount(int64_t B) { return std::max(std::min<int64_t>(B, 2), (B + kRowsPerGroup - 1) / kRowsPerGroup); }

LstmParams baseParams(int64_t T, int64_t B, int64_t H, bool reverse, bool batch_major) {
  LstmParams p;
  const int64_t groups = groupCount(B);
  p.group_rows = (B + groups - 1) / groups;
  p.T = T, p.B = B, p.H = H;
  p.HP = roundUp(H, kPanel);
  p.G = roundUp(4 * H, kPanel);
  p.reverse = reverse;
  p.batch_major = batch_major;
  return p;
}

launch::Grid groupsFor(int64_t B) { return launch::Grid::groups(static_cast<uint64_t>(groupCount(B)), kThreads); }

// What the backward of one layer direction needs besides the inputs and weights.
struct DirectionState {
  Tensor gates;  // [T][B][4H] float, after activation
  Tensor cells;  // [T][B][H] float
  Tensor c0;     // [B][H] float
  Tensor hprev;  // [T*B][H] (the layer's dtype, rows as the input's): h_{t-1} of every step; only when kept
};

// Runs one direction of a layer over x2d ([T*B, I] contiguous, time-major, or
// batch-major with batch_major), writing its outputs into `out` ([T][B][H] view, unit
// stride along H), `hn` and `cn` ([B][H], contiguous). With keep_hprev (training) the
// kernel also keeps each step's h_{t-1}, in x2d's row order.
DirectionState forwardDirection(const Tensor& x2d, bool batch_major, const DirectionWeights& w, const Tensor& h0,
                                const Tensor& c0, bool reverse, const Tensor& out, const Tensor& hn, const Tensor& cn,
                                bool keep_hprev) {
  const int64_t T = out.size(0), B = out.size(1), H = out.size(2);
  LstmParams p = baseParams(T, B, H, reverse, batch_major);
  p.seq_ts = out.stride(0), p.seq_bs = out.stride(1);
  p.keep_hprev = keep_hprev;
  const Tensor xw = w.b_ih.defined() ? at::addmm(w.b_ih + w.b_hh, x2d, w.w_ih.t()) : at::mm(x2d, w.w_ih.t());
  const auto f32 = x2d.options().dtype(at::kFloat);
  // Zero padding only where there is some (H not a multiple of 64, 4H not of 64).
  Tensor w_t = p.HP == H && p.G == 4 * H ? at::empty({p.HP, p.G}, f32) : at::zeros({p.HP, p.G}, f32);
  w_t.narrow(0, 0, H).narrow(1, 0, 4 * H).copy_(w.w_hh.t());
  const Tensor h0f = h0.to(at::kFloat).contiguous();
  DirectionState state{at::empty({T, B, 4 * H}, f32), at::empty({T, B, H}, f32), c0.to(at::kFloat).contiguous(),
                       keep_hprev ? at::empty({T * B, H}, out.options()) : Tensor()};
  const int64_t groups = groupCount(B);
  const Tensor scratch = at::empty({groups * kRowsPerGroup * p.G}, f32);
  Stream& stream = currentStream(x2d.device().index());
  const auto dtype = launch::storageDtype(x2d.scalar_type());
  launch::encodeKernel(stream, forward_kernels.pipeline(stream, launch::Variant::Plain, *dtype),
                       {&xw, &w_t, &h0f, &state.c0, &out, &hn, &cn, &state.gates, &state.cells, &scratch,
                        keep_hprev ? &state.hprev : &out},  // out in place of hprev: not written then
                       p, groupsFor(B));
  return state;
}

// The backward of one layer direction's recurrence, in one dispatch: the gates'
// gradients of every step ([T*B, 4H], rows batch-major with batch_major, returned in
// the layer's dtype for the GEMMs that follow) and grad_h0/grad_c0, written (float)
// into `gh0`/`gc0`.
Tensor backwardDirection(const Tensor& grad_seq, const Tensor& grad_hn, const Tensor& grad_cn,
                         const DirectionState& state, const DirectionWeights& w, bool reverse, bool batch_major,
                         int64_t T, int64_t B, int64_t H, const Tensor& gh0, const Tensor& gc0) {
  LstmParams p = baseParams(T, B, H, reverse, batch_major);
  const Tensor& any = state.gates;  // bound in place of an absent gradient (the kernel does not read it)
  p.has_grad_out = grad_seq.defined();
  p.has_grad_hn = grad_hn.defined();
  p.has_grad_cn = grad_cn.defined();
  if (grad_seq.defined()) p.seq_ts = grad_seq.stride(0), p.seq_bs = grad_seq.stride(1);
  const auto f32 = state.gates.options();
  Tensor w_pad;  // W_hh as it is when it needs no padding (a float32 weight: no copy)
  if (p.HP == H && p.G == 4 * H) {
    w_pad = w.w_hh.to(at::kFloat).contiguous();
  } else {
    w_pad = at::zeros({p.G, p.HP}, f32);
    w_pad.narrow(0, 0, 4 * H).narrow(1, 0, H).copy_(w.w_hh);
  }
  const int64_t groups = groupCount(B);
  const Tensor scratch = at::zeros({groups * kRowsPerGroup * (p.G + p.HP)}, f32);
  const Tensor dgates = at::empty({T * B, 4 * H}, f32);
  Stream& stream = currentStream(any.device().index());
  const auto dtype = launch::storageDtype(w.w_hh.scalar_type());
  launch::encodeKernel(stream, backward_kernels.pipeline(stream, launch::Variant::Plain, *dtype),
                       {grad_seq.defined() ? &grad_seq : &any, grad_hn.defined() ? &grad_hn : &any,
                        grad_cn.defined() ? &grad_cn : &any, &w_pad, &state.gates, &state.cells, &state.c0, &dgates,
                        &gh0, &gc0, &scratch},
                       p, groupsFor(B));
  return dgates.to(w.w_hh.scalar_type());
}

// The time-major view of the output of `input` laid out as the caller asked.
Tensor timeMajor(const Tensor& t, bool batch_first) { return batch_first ? t.transpose(0, 1) : t; }

// The layers' GEMMs run in the layer's dtype, which the kernels read: inside an
// autocast region they must not be cast (lstm has no autocast rule, so a float32 LSTM
// runs in float32 there).
struct NoAutocast {
  c10::impl::ExcludeDispatchKeyGuard guard{c10::DispatchKeySet(c10::DispatchKey::AutocastPrivateUse1)};
};

// Everything the forward produced that the backward reads.
struct ForwardRecord {
  std::vector<Tensor> layer_inputs;  // [T*B, I_l] per layer (after dropout)
  std::vector<Tensor> masks;         // dropout masks between layers
  std::vector<Tensor> gates, cells, c0s, hprevs;  // per layer direction
};

std::tuple<Tensor, Tensor, Tensor> fusedForward(const Tensor& input, TensorList hx, TensorList params,
                                                const LstmConfig& cfg, ForwardRecord* record) {
  const NoAutocast no_autocast;
  const int64_t D = cfg.directions(), L = cfg.num_layers;
  const Tensor x = timeMajor(input, cfg.batch_first);
  const int64_t T = x.size(0), B = x.size(1), H = hx[0].size(2);
  Tensor hy = at::empty({L * D, B, H}, input.options());
  Tensor cy = at::empty({L * D, B, H}, input.options());
  // A batch_first input is read as it is (rows batch-major); later layers' inputs are
  // the previous layers' time-major outputs.
  Tensor layer_input = input.contiguous().view({T * B, x.size(2)});
  Tensor output;
  for (int64_t l = 0; l < L; ++l) {
    const bool last = l == L - 1;
    // The last layer writes the returned output in the caller's layout.
    const Tensor out = last && cfg.batch_first ? at::empty({B, T, D * H}, input.options())
                                              : at::empty({T, B, D * H}, input.options());
    const Tensor out_tm = timeMajor(out, last && cfg.batch_first);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t idx = l * D + d;
      DirectionState s =
          forwardDirection(layer_input, l == 0 && cfg.batch_first, weightsOf(params, cfg, l, d), hx[0][idx],
                           hx[1][idx], d == 1, out_tm.narrow(2, d * H, H), hy[idx], cy[idx], record != nullptr);
      if (record) {
        record->gates.push_back(s.gates);
        record->cells.push_back(s.cells);
        record->c0s.push_back(s.c0);
        record->hprevs.push_back(s.hprev);
      }
    }
    if (record) record->layer_inputs.push_back(layer_input);
    if (last) {
      output = out;
      break;
    }
    Tensor next = out;
    if (cfg.dropsBetweenLayers()) {
      Tensor mask;
      if (cfg.dropout >= 1) {
        next = at::zeros_like(out);
        mask = at::zeros_like(out, out.options().dtype(at::kBool));
      } else {
        std::tie(next, mask) = at::native_dropout(out, cfg.dropout, true);
      }
      if (record) record->masks.push_back(mask);
    }
    layer_input = next.view({T * B, D * H});
  }
  return {output, hy, cy};
}

std::vector<Tensor> tensorsOf(const at::IValue& v) { return v.toTensorVector(); }

// aten::lstm.input's arguments after the tensors (has_biases, num_layers, dropout,
// train, bidirectional, batch_first): autograd wants a (missing) gradient for each.
constexpr size_t kNonTensorArguments = 6;

class FusedLstm : public torch::autograd::Function<FusedLstm> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& input, TensorList hx, TensorList params,
                               bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional,
                               bool batch_first) {
    const LstmConfig cfg{has_biases, num_layers, dropout, train, bidirectional, batch_first};
    ForwardRecord rec;
    auto [output, hy, cy] = fusedForward(input, hx, params, cfg, &rec);
    ctx->set_materialize_grads(false);
    std::vector<Tensor> saved{hx[0]};
    saved.insert(saved.end(), params.begin(), params.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["has_biases"] = has_biases;
    ctx->saved_data["num_layers"] = num_layers;
    ctx->saved_data["dropout"] = dropout;
    ctx->saved_data["train"] = train;
    ctx->saved_data["bidirectional"] = bidirectional;
    ctx->saved_data["batch_first"] = batch_first;
    ctx->saved_data["layer_inputs"] = rec.layer_inputs;
    ctx->saved_data["masks"] = rec.masks;
    ctx->saved_data["gates"] = rec.gates;
    ctx->saved_data["cells"] = rec.cells;
    ctx->saved_data["c0s"] = rec.c0s;
    ctx->saved_data["hprevs"] = rec.hprevs;
    return {output, hy, cy};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const bool create_graph = at::GradMode::is_enabled();
    variable_list result;
    {
      at::NoGradGuard no_grad;
      result = computeGrads(ctx, grads);
    }
    if (create_graph) result = refuseDoubleBackward(std::move(result));
    return result;
  }

 private:
  static variable_list computeGrads(AutogradContext* ctx, const variable_list& grads) {
    const NoAutocast no_autocast;
    const auto& sd = ctx->saved_data;
    const LstmConfig cfg{sd.at("has_biases").toBool(), sd.at("num_layers").toInt(), sd.at("dropout").toDouble(),
                         sd.at("train").toBool(),      sd.at("bidirectional").toBool(), sd.at("batch_first").toBool()};
    const variable_list saved = ctx->get_saved_variables();
    const Tensor& h0_all = saved[0];
    const TensorList params(saved.data() + 1, saved.size() - 1);
    const auto layer_inputs = tensorsOf(sd.at("layer_inputs"));
    const auto masks = tensorsOf(sd.at("masks"));
    const auto gates = tensorsOf(sd.at("gates"));
    const auto cells = tensorsOf(sd.at("cells"));
    const auto c0s = tensorsOf(sd.at("c0s"));
    const auto hprevs = tensorsOf(sd.at("hprevs"));
    const int64_t D = cfg.directions(), L = cfg.num_layers;
    const int64_t T = gates[0].size(0), B = gates[0].size(1), H = h0_all.size(2);

    Tensor g_layer = grads[0].defined() ? timeMajor(grads[0], cfg.batch_first) : Tensor();
    if (g_layer.defined() && g_layer.stride(2) != 1) g_layer = g_layer.contiguous();
    const Tensor& g_hy = grads[1];
    const Tensor& g_cy = grads[2];
    const auto f32 = gates[0].options();
    Tensor gh0 = at::empty({L * D, B, H}, f32), gc0 = at::empty({L * D, B, H}, f32);
    std::vector<Tensor> param_grads(params.size());
    Tensor grad_input;
    for (int64_t l = L - 1; l >= 0; --l) {
      Tensor grad_x;  // [T*B, I_l], rows in the order of the layer's input
      const bool need_grad_x = l > 0 || ctx->needs_input_grad(0);
      const bool batch_major = l == 0 && cfg.batch_first;  // as the forward read the layer's input
      for (int64_t d = 0; d < D; ++d) {
        const int64_t idx = l * D + d;
        const DirectionWeights w = weightsOf(params, cfg, l, d);
        const Tensor grad_seq = g_layer.defined() ? g_layer.narrow(2, d * H, H) : Tensor();
        const Tensor grad_hn = g_hy.defined() ? g_hy[idx].contiguous() : Tensor();
        const Tensor grad_cn = g_cy.defined() ? g_cy[idx].contiguous() : Tensor();
        const DirectionState state{gates[idx], cells[idx], c0s[idx], hprevs[idx]};
        const Tensor dg =
            backwardDirection(grad_seq, grad_hn, grad_cn, state, w, d == 1, batch_major, T, B, H, gh0[idx], gc0[idx]);
        const Tensor dg_t = dg.t();
        const int64_t first = idx * cfg.paramsPerDirection();
        param_grads[first] = dg_t.mm(layer_inputs[l]);
        param_grads[first + 1] = dg_t.mm(state.hprev);
        if (cfg.has_biases) {
          param_grads[first + 2] = dg.sum(0);
          param_grads[first + 3] = param_grads[first + 2].clone();
        }
        if (need_grad_x) grad_x = grad_x.defined() ? at::addmm(grad_x, dg, w.w_ih) : dg.mm(w.w_ih);
      }
      if (l == 0) {
        grad_input = grad_x;
        break;
      }
      g_layer = grad_x.view({T, B, D * H});
      if (cfg.dropsBetweenLayers()) {
        const Tensor& mask = masks[l - 1];
        g_layer = cfg.dropout >= 1 ? at::zeros_like(g_layer)
                                   : at::native_dropout_backward(g_layer, mask, 1.0 / (1.0 - cfg.dropout));
      }
    }
    const auto dtype = h0_all.scalar_type();
    variable_list result;
    if (grad_input.defined()) {
      const int64_t I = grad_input.size(1);
      grad_input = cfg.batch_first ? grad_input.view({B, T, I}) : grad_input.view({T, B, I});
    }
    result.push_back(grad_input);
    result.push_back(gh0.to(dtype));
    result.push_back(gc0.to(dtype));
    result.insert(result.end(), param_grads.begin(), param_grads.end());
    result.resize(result.size() + kNonTensorArguments);  // has_biases ... batch_first get none
    return result;
  }

  // As torch.autograd.function.once_differentiable: the gradients get a node that raises
  // when differentiated, instead of a graph that would silently miss the fused kernels.
  static variable_list refuseDoubleBackward(variable_list grads) {
    auto error = std::make_shared<torch::autograd::DelayedError>(
        "metalx's fused LSTM backward is not differentiable: nn.LSTM on metalx supports one backward pass "
        "(as cuDNN's RNNs on CUDA); double backward through an LSTM is not supported",
        static_cast<int64_t>(grads.size()));
    for (Tensor& g : grads)
      if (g.defined()) {
        g = g.detach();
        g.set_requires_grad(true);
      }
    return (*error)(std::move(grads));
  }
};

// aten::lstm.input at AutogradPrivateUse1 (kWithAutograd: the autograd Function) and
// at PrivateUse1 (below autograd, as in inference mode: the forward alone).
template <bool kWithAutograd>
std::tuple<Tensor, Tensor, Tensor> lstmInput(const Tensor& input, TensorList hx, TensorList params, bool has_biases,
                                             int64_t num_layers, double dropout, bool train, bool bidirectional,
                                             bool batch_first) {
  const LstmConfig cfg{has_biases, num_layers, dropout, train, bidirectional, batch_first};
  if (!fusedCovers(input, hx, params, cfg))
    return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
  if constexpr (kWithAutograd) {
    variable_list out =
        FusedLstm::apply(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
    return {out[0], out[1], out[2]};
  } else {
    return fusedForward(input, hx, params, cfg, nullptr);
  }
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("lstm.input", TORCH_FN(lstmInput<true>)); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("lstm.input", TORCH_FN(lstmInput<false>)); }

}  // namespace
}  // namespace metalx
