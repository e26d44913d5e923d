// The seed's "advanced usage": triton.autotune around the add kernel, inside torch.compile
// (four configs, BLOCK_SIZE 4 and 2, key=[]), then a softmax tuned over block sizes, with the
// tuning database making a second tuner (or process) skip the timing.
// examples/seed_autotune.cpp runs it as a checked example; `tessera demo` prints it.
#pragma once

#include <cmath>
#include <iomanip>
#include <iostream>

#include <tessera/autotune.h>
#include <tessera/compile.h>
#include <tessera/tessera.h>

namespace seed_autotune {

namespace tl = tessera::tl;
using tessera::Tensor;

TL_JIT(add_kernel_autotuned, tl::Ptr in_ptr0, tl::Ptr in_ptr1, tl::Ptr out_ptr, tl::Int n_elements,
       tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto block_start = pid * BLOCK_SIZE;
  auto offsets = block_start + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(in_ptr0 + offsets, mask);
  auto y = tl::load(in_ptr1 + offsets, mask);
  auto output = x + y;
  tl::store(out_ptr + offsets, output, mask);
}

// Row softmax over rows of any length: three passes over the row in blocks of BLOCK_SIZE (max,
// sum of exponentials, output), so BLOCK_SIZE is free to tune.
TL_JIT(softmax_looped, tl::Ptr out_ptr, tl::Ptr in_ptr, tl::Int in_stride, tl::Int out_stride,
       tl::Int n_cols, tl::Const BLOCK_SIZE) {
  auto row = tl::program_id(0);
  auto cols = tl::arange(0, BLOCK_SIZE);
  auto in_row = in_ptr + row * in_stride;
  tl::Var m = tl::full({BLOCK_SIZE}, -INFINITY, tl::float32);
  tl::range(0, n_cols, BLOCK_SIZE, [&](tl::Tile start) {
    auto offs = start + cols;
    m = tl::maximum(m, tl::load(in_row + offs, offs < n_cols, -INFINITY));
  });
  auto row_max = tl::max(m, 0);
  tl::Var d = tl::zeros({BLOCK_SIZE}, tl::float32);
  tl::range(0, n_cols, BLOCK_SIZE, [&](tl::Tile start) {
    auto offs = start + cols;
    d = d + tl::exp(tl::load(in_row + offs, offs < n_cols, -INFINITY) - row_max);
  });
  auto inv = 1.0f / tl::sum(d, 0);
  tl::range(0, n_cols, BLOCK_SIZE, [&](tl::Tile start) {
    auto offs = start + cols;
    auto mask = offs < n_cols;
    auto e = tl::exp(tl::load(in_row + offs, mask, -INFINITY) - row_max);
    tl::store(out_ptr + row * out_stride + offs, e * inv, mask);
  });
}

inline std::vector<tl::Config> softmax_configs(std::initializer_list<int> blocks) {
  std::vector<tl::Config> cs;
  for (int b : blocks) cs.push_back(tl::Config({{"BLOCK_SIZE", b}}));
  return cs;
}

inline Tensor softmax_with(const tl::TunedKernel& tuned, const Tensor& x) {
  Tensor y = tessera::empty_like(x);
  const int64_t rows = x.size(0).guard_int(), cols = x.size(1).guard_int();
  tuned[{rows}](y, x, x.stride(0), y.stride(0), cols);
  return y;
}

inline bool run(std::ostream& os) {
  using namespace tessera;
  bool ok = true;
  auto check = [&](const char* what, bool good) {
    os << "  " << what << ": " << (good ? "yes" : "NO") << "\n";
    ok = ok && good;
  };

  os << "\n== Advanced usage: tl::autotune inside tessera::compile (the seed's four configs, "
        "key=[]) ==\n";
  auto add_tuned =
      tl::autotune(add_kernel_autotuned,
                   {tl::Config({{"BLOCK_SIZE", 4}}, /*num_warps=*/8, /*num_stages=*/3),
                    tl::Config({{"BLOCK_SIZE", 4}}, 4, 4), tl::Config({{"BLOCK_SIZE", 2}}, 8, 3),
                    tl::Config({{"BLOCK_SIZE", 2}}, 4, 4)},
                   /*key=*/{});
  auto add_fn = [&](const Tensor& x, const Tensor& y) {
    Tensor output = zeros_like(x);
    auto n_elements = output.numel();
    auto grid = [&](const tl::Meta& meta) {
      return tl::Grid{tl::cdiv(n_elements, meta["BLOCK_SIZE"])};
    };
    add_tuned[grid](x, y, output, n_elements);
    return output;
  };
  auto compiled = compile(add_fn, {.fullgraph = true, .name = "add_fn"});
  Tensor x = randn({4}), y = randn({4});
  Tensor out = compiled(x, y);
  os << "Vector addition of\nX:\t" << x << "\nY:\t" << y << "\nis equal to\n" << out << "\n";
  check("equals x + y", equal(out, x + y));
  os << "  timings (num_warps and num_stages do not change CPU code: configs that differ only in "
        "them "
        "are timed once):\n";
  for (const auto& [c, ms] : add_tuned.last_timings())
    os << "    " << c.str() << ": " << std::setprecision(3) << ms * 1e3 << " us\n";
  os << "  chosen: " << add_tuned.best_config()->str() << "\n";
  os << "  the graph records every config's grid:\n" << compiled.stats().last_graph;

  os << "\n== A softmax tuned over block sizes (key: n_cols) ==\n";
  const auto configs = softmax_configs({128, 256, 512, 1024});
  auto tuned = tl::autotune(softmax_looped, configs, {"n_cols"});
  Tensor a = randn({512, 3000});
  Tensor s = softmax_with(tuned, a);
  check("matches softmax(x, 1)", allclose(s, softmax(a, 1), 1e-5, 1e-7));
  for (const auto& [c, ms] : tuned.last_timings())
    os << "    " << c.str() << ": " << std::setprecision(3) << ms << " ms\n";
  os << "  chosen for n_cols=3000: " << tuned.best_config()->str() << "\n";
  // A second tuner (as a new process would) finds the timings in the tuning database.
  auto again = tl::autotune(softmax_looped, configs, {"n_cols"});
  Tensor s2 = softmax_with(again, a);
  check("a new tuner reuses the database (no timing)",
        again.last_round_timed() == 0 && again.best_config()->str() == tuned.best_config()->str());
  check("and matches", allclose(s2, softmax(a, 1), 1e-5, 1e-7));
  os << "  (`tessera tune-db ls` lists the database)\n";
  return ok;
}

}  // namespace seed_autotune
