// Triton's tutorial 06 forward kernel (FlashAttention-2 in its pointer-based form), shared by
// examples/tutorial_06_attention.cpp (which checks and benchmarks it) and bench/gpu_kernels.cpp
// (the shapes beside Triton's kernel and PyTorch's SDPA). In float16 or bfloat16: q and p
// are rounded to the inputs' type for their dots, as the tutorial rounds to q's and v's.
// (Kernels in a header are for one translation unit each, as the examples and benchmarks are.)
#pragma once

#include <cmath>

#include <tessera/tessera.h>
#include <tessera/tl.h>

namespace attention_example {

namespace tl = tessera::tl;

TL_JIT(attn_fwd_kernel, tl::Ptr Q, tl::Ptr K, tl::Ptr V, tl::Float sm_scale, tl::Ptr L, tl::Ptr Out,
       tl::Int stride_qh, tl::Int stride_qm, tl::Int stride_kh, tl::Int stride_kn,
       tl::Int stride_vh, tl::Int stride_vn, tl::Int stride_oh, tl::Int stride_om, tl::Int N_CTX,
       tl::Const BLOCK_M, tl::Const BLOCK_DMODEL, tl::Const BLOCK_N, tl::Const IS_CAUSAL) {
  auto start_m = tl::program_id(0);
  auto off_hz = tl::program_id(1);
  auto offs_m = start_m * BLOCK_M + tl::arange(0, BLOCK_M);
  auto offs_n = tl::arange(0, BLOCK_N);
  auto offs_d = tl::arange(0, BLOCK_DMODEL);
  // The running max and sum of each query row, and the output accumulator.
  tl::Var m_i = tl::zeros({BLOCK_M}, tl::float32) - INFINITY;
  tl::Var l_i = tl::zeros({BLOCK_M}, tl::float32);
  tl::Var acc = tl::zeros({BLOCK_M, BLOCK_DMODEL}, tl::float32);
  // Scale by log2(e) so that exp2 can be used.
  auto qk_scale = sm_scale * 1.44269504f;
  auto q = tl::load(Q + off_hz * stride_qh + offs_m[{tl::_, tl::None}] * stride_qm +
                    offs_d[{tl::None, tl::_}]);
  q = (q * qk_scale).to(Q.dtype());
  tl::Tile hi = IS_CAUSAL.int_value() ? (start_m + 1) * BLOCK_M : tl::Tile(N_CTX);
  tl::range(0, hi, BLOCK_N, [&](tl::Tile start_n) {
    // k is loaded transposed: [BLOCK_DMODEL, BLOCK_N].
    auto k = tl::load(K + off_hz * stride_kh + (start_n + offs_n)[{tl::None, tl::_}] * stride_kn +
                      offs_d[{tl::_, tl::None}]);
    auto v = tl::load(V + off_hz * stride_vh + (start_n + offs_n)[{tl::_, tl::None}] * stride_vn +
                      offs_d[{tl::None, tl::_}]);
    tl::Tile qk = tl::zeros({BLOCK_M, BLOCK_N}, tl::float32);
    if (IS_CAUSAL.int_value())
      qk = tl::where(offs_m[{tl::_, tl::None}] >= (start_n + offs_n[{tl::None, tl::_}]), qk,
                     -INFINITY);
    qk += tl::dot(q, k);
    auto m_i_new = tl::maximum(m_i, tl::max(qk, 1));
    // Triton's float32 `exp2` is the hardware's approximation (ex2.approx.f32): tl::fast_exp2
    // (tl::exp2 is the accurate function, about 20 instructions instead of one).
    auto alpha = tl::fast_exp2(m_i - m_i_new);
    auto p = tl::fast_exp2(qk - m_i_new[{tl::_, tl::None}]);
    acc *= alpha[{tl::_, tl::None}];
    acc += tl::dot(p.to(V.dtype()), v);
    l_i = l_i * alpha + tl::sum(p, 1);
    m_i = m_i_new;
  });
  auto out = acc / l_i[{tl::_, tl::None}];
  tl::store(L + off_hz * N_CTX + offs_m, m_i + tl::log2(l_i));
  tl::store(
      Out + off_hz * stride_oh + offs_m[{tl::_, tl::None}] * stride_om + offs_d[{tl::None, tl::_}],
      out.to(Out.dtype()));
}

}  // namespace attention_example
