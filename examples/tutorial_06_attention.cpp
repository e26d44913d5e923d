// Triton's tutorial 06 (fused attention, the forward pass of FlashAttention-2), ported as written
// in its pointer-based form: per block of queries, a loop over blocks of keys keeps the running row
// max m_i and sum l_i, rescales the accumulator by exp2(m_i - m_new), and adds p @ v with p cast to
// fp16 (a dot of a register tile); causal masking by position; the log-sum-exp stored for the
// backward pass. Checked against softmax(q k^T * sm_scale) v in float64 on fresh fp16 inputs,
// causal and not. Runs on the GPU with `--cuda`; `--bench` times it beside the eager composition
// softmax(q k^T * sm_scale) v in fp16 (tutorial_bench.h), autotuned over the tutorial's block
// sizes.
//
// Differences from the Python: IS_CAUSAL is an int constexpr; the newer tutorial's block
// pointers / tensor descriptors (TMA on Hopper) are not in tessera yet, so this is the
// pointer-based version of the same algorithm.
#include <cmath>
#include <cstring>
#include <iostream>

#include <tessera/autotune.h>
#include <tessera/tessera.h>
#include <tessera/tl.h>

#include "attention.h"
#include "tutorial_bench.h"

namespace tl = tessera::tl;
using attention_example::attn_fwd_kernel;
using tessera::Tensor;

// softmax(q k^T * sm_scale) v with eager operators, in q's dtype (the causal mask as -inf).
Tensor eager_attention(const Tensor& q, const Tensor& k, const Tensor& v, double sm_scale,
                       bool causal) {
  Tensor s = tessera::matmul(q, k.transpose(1, 2)) * sm_scale;
  if (causal) {
    const int64_t N = q.size(1).guard_int();
    auto on = tessera::TensorOptions().device(q.device());
    Tensor rows = tessera::arange(N, on).view({N, 1}), cols = tessera::arange(N, on).view({1, N});
    s = tessera::where(rows >= cols, s, -INFINITY);
  }
  return tessera::matmul(tessera::softmax(s, 2), v);
}

// The tutorial's benchmark (forward): heads of N_CTX x HEAD_DIM fp16, causal and not, the kernel
// autotuned over the tutorial's BLOCK_M in {64, 128} x BLOCK_N in {32, 64, 128}.
void bench(const tutorial_bench::Args& args) {
  std::vector<tl::Config> configs;
  for (int64_t bm : {64, 128})
    for (int64_t bn : {32, 64, 128})
      configs.push_back(tl::Config({{"BLOCK_M", bm}, {"BLOCK_N", bn}}, 4, 3));
  auto tuned = tl::autotune(attn_fwd_kernel, configs, {"N_CTX", "BLOCK_DMODEL", "IS_CAUSAL"});
  const tessera::Device dev = args.device();
  tutorial_bench::header();
  const int64_t H = 8;
  for (const int64_t D : {64, 128}) {
    for (const int64_t N : {1024}) {
      for (const int causal : {0, 1}) {
        auto opt = tessera::TensorOptions().dtype(tessera::float16).device(dev);
        Tensor q = (tessera::randn({H, N, D}) * 0.5).to(opt),
               k = (tessera::randn({H, N, D}) * 0.5).to(opt);
        Tensor v = tessera::randn({H, N, D}).to(opt);
        const double sm_scale = 1.0 / std::sqrt(static_cast<double>(D));
        auto kernel = [&] {
          Tensor o = tessera::empty({H, N, D}, opt);
          Tensor lse = tessera::empty({H, N}, tessera::TensorOptions().device(dev));
          auto grid = [&](const tl::Meta& m) { return tl::Grid{tl::cdiv(N, m["BLOCK_M"]), H}; };
          tuned[grid](q, k, v, sm_scale, lse, o, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
                      v.stride(0), v.stride(1), o.stride(0), o.stride(1), N,
                      tl::meta("BLOCK_DMODEL", D), tl::meta("IS_CAUSAL", causal));
          return o;
        };
        const double flops = 4.0 * H * N * N * D * (causal ? 0.5 : 1.0);
        const std::string name = "attention fwd H=" + std::to_string(H) +
                                 " N=" + std::to_string(N) + " D=" + std::to_string(D) +
                                 (causal ? " causal" : "");
        tutorial_bench::row(
            name, args, kernel, [&] { return eager_attention(q, k, v, sm_scale, causal); }, flops);
        // The strongest eager baseline: the same composition in float32 (inputs converted once,
        // outside the timing).
        Tensor q32 = q.to(tessera::float32), k32 = k.to(tessera::float32),
               v32 = v.to(tessera::float32);
        tutorial_bench::row(
            name + " (eager f32)", args, kernel,
            [&] { return eager_attention(q32, k32, v32, sm_scale, causal); }, flops);
      }
    }
  }
}

int main(int argc, char** argv) {
  const tutorial_bench::Args args = tutorial_bench::parse(argc, argv);
  if (args.bench) return bench(args), 0;
  const tessera::Device dev = args.device();
  const int64_t H = 2, N = 128, D = 64;
  const int64_t BM = 32, BN = 32;
  const double sm_scale = 1.0 / std::sqrt(static_cast<double>(D));
  Tensor q = (tessera::randn({H, N, D}) * 0.5).to(tessera::float16);
  Tensor k = (tessera::randn({H, N, D}) * 0.5).to(tessera::float16);
  Tensor v = tessera::randn({H, N, D}).to(tessera::float16);
  bool ok = true;
  for (int causal : {0, 1}) {
    Tensor o =
        tessera::empty({H, N, D}, tessera::TensorOptions().dtype(tessera::float16).device(dev));
    Tensor lse = tessera::empty({H, N}, tessera::TensorOptions().device(dev));
    Tensor gq = q.to(dev), gk = k.to(dev), gv = v.to(dev);
    attn_fwd_kernel[{N / BM, H}](
        gq, gk, gv, sm_scale, lse, o, gq.stride(0), gq.stride(1), gk.stride(0), gk.stride(1),
        gv.stride(0), gv.stride(1), o.stride(0), o.stride(1), N, tl::meta("BLOCK_M", BM),
        tl::meta("BLOCK_DMODEL", D), tl::meta("BLOCK_N", BN), tl::meta("IS_CAUSAL", causal));
    // Reference in float64.
    Tensor qd = q.to(tessera::float64), kd = k.to(tessera::float64), vd = v.to(tessera::float64);
    Tensor s = tessera::matmul(qd, kd.transpose(1, 2)) * sm_scale;
    if (causal) {
      Tensor rows = tessera::arange(N).view({N, 1}), cols = tessera::arange(N).view({1, N});
      s = tessera::where(rows >= cols, s, -INFINITY);
    }
    Tensor ref = tessera::matmul(tessera::softmax(s, 2), vd);
    const bool good = tessera::allclose(o.cpu().to(tessera::float64), ref, 2e-2, 2e-2);
    std::cout << "attention H=" << H << " N=" << N << " D=" << D << (causal ? " causal" : "")
              << " on " << dev.str() << ": " << (good ? "matches" : "MISMATCH") << "\n";
    ok = ok && good;
  }
  std::cout << (ok ? "tutorial_06_attention: OK" : "tutorial_06_attention: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
