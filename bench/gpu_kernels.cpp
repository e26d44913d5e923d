// GPU benchmarks without a framework (the GPU machine has no Google Benchmark): CUDA events
// around each run, the median of many runs, an L2-sized buffer rewritten between runs (untimed),
// each kernel checked against the CPU before it is timed. scripts/gpu-check.sh runs it; peers
// (Triton, torch) are timed beside it by bench/peers on that machine (issue 15).
//
//   bench_gpu_kernels            a table: kernel, size, median us, GB/s, % of the copy ceiling
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "runtime/cuda/context.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"

using namespace tessera;
namespace tl = tessera::tl;
namespace rc = tessera::runtime::cuda;

TL_JIT(add_kernel, tl::Ptr x, tl::Ptr y, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(out + offs, tl::load(x + offs, mask) + tl::load(y + offs, mask), mask);
}

TL_JIT(softmax_kernel, tl::Ptr x, tl::Ptr out, tl::Int n_cols, tl::Const BLOCK) {
  auto row = tl::program_id(0);
  auto cols = tl::arange(0, BLOCK);
  auto mask = cols < n_cols;
  auto v = tl::load(x + row * n_cols + cols, mask, -INFINITY);
  auto e = tl::exp(v - tl::max(v, 0));
  tl::store(out + row * n_cols + cols, e / tl::sum(e, 0), mask);
}

TL_JIT(copy_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(out + offs, tl::load(x + offs, mask), mask);
}

namespace {

double median_us(const std::function<void()>& run, Tensor& flush) {
  for (int i = 0; i < 5; ++i) run();
  std::vector<double> t;
  rc::Event a(0), b(0);
  for (int i = 0; i < 50; ++i) {
    flush.fill_(static_cast<double>(i));  // evicts the inputs from L2 (untimed)
    a.record(rc::current_stream(0));
    run();
    b.record(rc::current_stream(0));
    b.synchronize();
    t.push_back(1000.0 * rc::Event::elapsed_ms(a, b));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const char* what, const std::string& size, double us, double bytes, double copy_gbs) {
  const double gbs = bytes / us / 1e3;
  std::printf("| %-22s | %-14s | %9.2f | %8.0f | %5.0f%% |\n", what, size.c_str(), us, gbs,
              copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 100.0);
}

}  // namespace

int main() {
  if (!cuda_is_available()) {
    std::printf("no CUDA GPU on this machine\n");
    return 0;
  }
  const Device cuda("cuda");
  Tensor flush = empty({64 << 20}, TensorOptions().device(cuda));  // 256 MiB > L2
  std::printf("| kernel | size | median us | GB/s | of copy |\n|---|---|---|---|---|\n");
  double copy_gbs = 0;
  for (int64_t n : {int64_t{1} << 20, int64_t{1} << 24, int64_t{1} << 28}) {
    Tensor x = randn({n}, TensorOptions().device(cuda)),
           y = randn({n}, TensorOptions().device(cuda));
    Tensor out = empty({n}, TensorOptions().device(cuda));
    const auto grid = tl::Grid{tl::cdiv(n, 1024)};
    copy_kernel[grid](x, out, n, tl::meta("BLOCK", 1024));
    if (!equal(out.cpu(), x.cpu())) return std::printf("copy: wrong result\n"), 1;
    const double cu =
        median_us([&] { copy_kernel[grid](x, out, n, tl::meta("BLOCK", 1024)); }, flush);
    if (n == (int64_t{1} << 28)) copy_gbs = 8.0 * static_cast<double>(n) / cu / 1e3;
    row("copy (tile kernel)", "2^" + std::to_string(__builtin_ctzll(n)), cu, 8.0 * n, copy_gbs);
    add_kernel[grid](x, y, out, n, tl::meta("BLOCK", 1024));
    if (!equal(out.cpu(), x.cpu() + y.cpu())) return std::printf("add: wrong result\n"), 1;
    const double us =
        median_us([&] { add_kernel[grid](x, y, out, n, tl::meta("BLOCK", 1024)); }, flush);
    row("add f32 (the seed's)", "2^" + std::to_string(__builtin_ctzll(n)), us, 12.0 * n, copy_gbs);
  }
  for (int64_t cols : {1024, 4096, 16384}) {
    const int64_t rows = 4096;
    Tensor x = randn({rows, cols}, TensorOptions().device(cuda));
    Tensor out = empty({rows, cols}, TensorOptions().device(cuda));
    const int64_t block = cols;
    // num_warps as Triton's softmax tutorial picks it: 4, 8 from 2048 columns, 16 from 4096.
    const int64_t warps = block >= 4096 ? 16 : block >= 2048 ? 8 : 4;
    softmax_kernel[{rows}](x, out, cols, tl::meta("BLOCK", block), tl::num_warps(warps));
    if (!allclose(out.cpu(), softmax(x.cpu(), 1), 1e-5, 1e-6))
      return std::printf("softmax: wrong result\n"), 1;
    const double us = median_us(
        [&] {
          softmax_kernel[{rows}](x, out, cols, tl::meta("BLOCK", block), tl::num_warps(warps));
        },
        flush);
    row("softmax f32 rows", "4096x" + std::to_string(cols), us, 8.0 * rows * cols, copy_gbs);
  }
  return 0;
}
