// Parameters of kernels/attention.metal (mirrored there field for field).
#pragma once

#include <cstdint>

namespace metalx::kernels {

struct AttentionParams {
  int64_t B, Hq, Hk, L, S, D, Dv;  // sizes; Hq a multiple of Hk
  int64_t q_bs, q_hs, q_ls, q_ds;  // strides, in elements: batch, head, sequence, feature
  int64_t k_bs, k_hs, k_ls, k_ds;
  int64_t v_bs, v_hs, v_ls, v_ds;
  int64_t o_bs, o_hs, o_ls, o_ds;  // the output (forward), out (backward)
  int64_t g_bs, g_hs, g_ls, g_ds;  // grad_out (backward)
  int64_t m_bs, m_hs, m_ls, m_ss;  // the additive mask, 0 where broadcast
  int64_t has_mask, causal, debug, mask_grad;
  int64_t gpu_code;  // simulator: run the GPU's per-lane code, not the lane-0 kernels (tests)
  uint64_t group0;  // Philox counter group of element 0 (offset / 4)
  uint32_t seed_lo, seed_hi;
  float scale, dropout;
};
static_assert(sizeof(AttentionParams) == 312, "AttentionParams must match kernels/attention.metal");

}  // namespace metalx::kernels
