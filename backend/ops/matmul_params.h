// Parameters of kernels/matmul.metal (mirrored there field for field).
#pragma once

#include <cstdint>

namespace metalx::kernels {

struct MatmulParams {
  int64_t M, N, K;
  int64_t a_rs, a_cs, a_bs;  // strides of A (rows, columns, batches), in elements
  int64_t b_rs, b_cs, b_bs;
  int64_t c_rs, c_cs, c_bs;
  int64_t s_rs, s_cs, s_bs;  // the bias S, broadcast by stride 0
  int64_t reduce_batches;    // > 1: batches summed into one C (addbmm)
  int64_t round_terms;       // alpha * AB and beta * S rounded to the dtype before the sum (addr)
  float alpha, beta;         // beta == 0: S is not read
};

struct GemvParams {
  int64_t M, K;
  int64_t a_rs, a_cs;
  int64_t x_s, y_s, s_s;
  float alpha, beta;
};

}  // namespace metalx::kernels
