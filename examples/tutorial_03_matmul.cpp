// Triton's tutorial 03 (matrix multiplication), ported as written: grouped program order for L2
// reuse, offsets wrapped with `% M` and hinted with multiple_of / max_contiguous, pointer tiles
// advanced with `+=` inside the K loop, an fp32 accumulator updated by `tl::dot`, an optional
// fused activation, fp16 output, autotuned over configs keyed on (M, N, K). Checked against a
// double-precision reference on fresh fp16 inputs, at sizes that are and are not multiples of the
// blocks. Runs on the GPU when one is present (`--cuda`), else on the CPU. `--bench` times it
// beside the eager `matmul` (the tutorial's benchmark against torch.matmul; tutorial_bench.h).
//
// Differences from the Python, forced by C++ or not yet in tessera: ACTIVATION is an int
// constexpr (0 none, 1 leaky_relu) where Triton passes a string; `tl.assume` (newer Triton) is
// left out.
#include <cstring>
#include <iostream>

#include <tessera/autotune.h>
#include <tessera/tessera.h>
#include <tessera/tl.h>

#include "tutorial_bench.h"

namespace tl = tessera::tl;
using tessera::Tensor;

tl::Tile leaky_relu(const tl::Tile& x) {
  return tl::where(x >= 0, x, 0.01f * x);
}

TL_JIT(matmul_kernel, tl::Ptr a_ptr, tl::Ptr b_ptr, tl::Ptr c_ptr, tl::Int M, tl::Int N, tl::Int K,
       tl::Int stride_am, tl::Int stride_ak, tl::Int stride_bk, tl::Int stride_bn,
       tl::Int stride_cm, tl::Int stride_cn, tl::Const BLOCK_SIZE_M, tl::Const BLOCK_SIZE_N,
       tl::Const BLOCK_SIZE_K, tl::Const GROUP_SIZE_M, tl::Const ACTIVATION) {
  // Program ids in groups of GROUP_SIZE_M rows, to promote L2 reuse.
  auto pid = tl::program_id(0);
  auto num_pid_m = tl::cdiv(M, BLOCK_SIZE_M);
  auto num_pid_n = tl::cdiv(N, BLOCK_SIZE_N);
  auto num_pid_in_group = GROUP_SIZE_M * num_pid_n;
  auto group_id = pid / num_pid_in_group;
  auto first_pid_m = group_id * GROUP_SIZE_M;
  auto group_size_m = tl::minimum(num_pid_m - first_pid_m, GROUP_SIZE_M);
  auto pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m);
  auto pid_n = (pid % num_pid_in_group) / group_size_m;

  // Pointers to the first blocks of A and B.
  auto offs_am = (pid_m * BLOCK_SIZE_M + tl::arange(0, BLOCK_SIZE_M)) % M;
  auto offs_bn = (pid_n * BLOCK_SIZE_N + tl::arange(0, BLOCK_SIZE_N)) % N;
  offs_am = tl::max_contiguous(tl::multiple_of(offs_am, BLOCK_SIZE_M), BLOCK_SIZE_M);
  offs_bn = tl::max_contiguous(tl::multiple_of(offs_bn, BLOCK_SIZE_N), BLOCK_SIZE_N);
  auto offs_k = tl::arange(0, BLOCK_SIZE_K);
  tl::Var a_ptrs =
      a_ptr + (offs_am[{tl::_, tl::None}] * stride_am + offs_k[{tl::None, tl::_}] * stride_ak);
  tl::Var b_ptrs =
      b_ptr + (offs_k[{tl::_, tl::None}] * stride_bk + offs_bn[{tl::None, tl::_}] * stride_bn);

  // The K loop: fp32 accumulation of fp16 products.
  tl::Var accumulator = tl::zeros({BLOCK_SIZE_M, BLOCK_SIZE_N}, tl::float32);
  tl::range(0, tl::cdiv(K, BLOCK_SIZE_K), [&](tl::Tile k) {
    auto a = tl::load(a_ptrs, offs_k[{tl::None, tl::_}] < K - k * BLOCK_SIZE_K, 0.0f);
    auto b = tl::load(b_ptrs, offs_k[{tl::_, tl::None}] < K - k * BLOCK_SIZE_K, 0.0f);
    accumulator = tl::dot(a, b, tl::Operand(accumulator));
    a_ptrs += BLOCK_SIZE_K * stride_ak;
    b_ptrs += BLOCK_SIZE_K * stride_bk;
  });
  tl::Tile acc = accumulator;
  if (ACTIVATION.int_value() == 1) acc = leaky_relu(acc);  // fused, chosen while tracing
  auto c = acc.to(tl::float16);

  // Write back the block of C, masked at the edges.
  auto offs_cm = pid_m * BLOCK_SIZE_M + tl::arange(0, BLOCK_SIZE_M);
  auto offs_cn = pid_n * BLOCK_SIZE_N + tl::arange(0, BLOCK_SIZE_N);
  auto c_ptrs =
      c_ptr + stride_cm * offs_cm[{tl::_, tl::None}] + stride_cn * offs_cn[{tl::None, tl::_}];
  auto c_mask = (offs_cm[{tl::_, tl::None}] < M) & (offs_cn[{tl::None, tl::_}] < N);
  tl::store(c_ptrs, c, c_mask);
}

// The tutorial's autotuning, with configs sized for a CPU (or a first-stage GPU kernel).
auto tuned_matmul = tl::autotune(
    matmul_kernel,
    {tl::Config(
         {{"BLOCK_SIZE_M", 32}, {"BLOCK_SIZE_N", 32}, {"BLOCK_SIZE_K", 32}, {"GROUP_SIZE_M", 8}}, 4,
         3),
     tl::Config(
         {{"BLOCK_SIZE_M", 64}, {"BLOCK_SIZE_N", 32}, {"BLOCK_SIZE_K", 32}, {"GROUP_SIZE_M", 8}}, 4,
         4)},
    {"M", "N", "K"});

template <class Tuned>
Tensor matmul_with(Tuned& tuned, const Tensor& a, const Tensor& b, int activation) {
  const int64_t M = a.size(0).guard_int(), K = a.size(1).guard_int(), N = b.size(1).guard_int();
  Tensor c =
      tessera::empty({M, N}, tessera::TensorOptions().dtype(tessera::float16).device(a.device()));
  auto grid = [&](const tl::Meta& meta) {
    return tl::Grid{tl::cdiv(M, meta["BLOCK_SIZE_M"]) * tl::cdiv(N, meta["BLOCK_SIZE_N"])};
  };
  tuned[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
              c.stride(1), tl::meta("ACTIVATION", activation));
  return c;
}

Tensor matmul(const Tensor& a, const Tensor& b, int activation) {
  return matmul_with(tuned_matmul, a, b, activation);
}

// The tutorial's benchmark: square products in fp16 and fp32 inputs beside the eager matmul, the
// kernel autotuned over the tutorial's own eight CUDA configs (get_cuda_autotune_config, fp16).
void bench(const tutorial_bench::Args& args) {
  auto cfg = [](int64_t bm, int64_t bn, int64_t bk, int warps, int stages) {
    return tl::Config(
        {{"BLOCK_SIZE_M", bm}, {"BLOCK_SIZE_N", bn}, {"BLOCK_SIZE_K", bk}, {"GROUP_SIZE_M", 8}},
        warps, stages);
  };
  auto triton_configs =
      tl::autotune(matmul_kernel,
                   {cfg(128, 256, 64, 8, 3), cfg(64, 256, 32, 4, 4), cfg(128, 128, 32, 4, 4),
                    cfg(128, 64, 32, 4, 4), cfg(64, 128, 32, 4, 4), cfg(128, 32, 32, 4, 4),
                    cfg(64, 32, 32, 2, 5), cfg(32, 64, 32, 2, 5)},
                   {"M", "N", "K"});
  const tessera::Device dev = args.device();
  tutorial_bench::header();
  for (const int64_t n : {512, 1024}) {
    for (const tessera::DType dt : {tessera::float16, tessera::float32}) {
      Tensor a = tessera::randn({n, n}).to(dt).to(dev), b = tessera::randn({n, n}).to(dt).to(dev);
      tutorial_bench::row(
          "matmul " + std::to_string(n) + "^3 " + tessera::dtype_name(dt), args,
          [&] { return matmul_with(triton_configs, a, b, 0); },
          [&] { return tessera::matmul(a, b); }, 2.0 * n * n * n);
    }
  }
  std::cout << "best config for the last size: "
            << (triton_configs.best_config() ? triton_configs.best_config()->str() : "none")
            << "\n";
}

int main(int argc, char** argv) {
  const tutorial_bench::Args args = tutorial_bench::parse(argc, argv);
  if (args.bench) return bench(args), 0;
  const tessera::Device dev = args.device();
  bool ok = true;
  struct Size {
    int64_t m, n, k;
  };
  for (const Size s : {Size{128, 96, 64}, Size{100, 70, 90}}) {
    for (int activation : {0, 1}) {
      Tensor a = tessera::randn({s.m, s.k}).to(tessera::float16);
      Tensor b = tessera::randn({s.k, s.n}).to(tessera::float16);
      Tensor c = matmul(a.to(dev), b.to(dev), activation).cpu();
      Tensor ref = tessera::matmul(a.to(tessera::float64), b.to(tessera::float64));
      if (activation == 1) ref = tessera::where(ref >= 0, ref, ref * 0.01);
      // fp16 output: relative error about 2^-11 of each value.
      const bool good = tessera::allclose(c.to(tessera::float64), ref, 2e-3, 2e-3);
      std::cout << "matmul " << s.m << "x" << s.n << "x" << s.k
                << (activation ? " + leaky_relu" : "") << " on " << dev.str() << ": "
                << (good ? "matches" : "MISMATCH") << "\n";
      ok = ok && good;
    }
  }
  std::cout << "best config for the last size: "
            << (tuned_matmul.best_config() ? tuned_matmul.best_config()->str() : "none") << "\n";
  std::cout << (ok ? "tutorial_03_matmul: OK" : "tutorial_03_matmul: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
