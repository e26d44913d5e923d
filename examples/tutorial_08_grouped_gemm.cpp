// Triton's tutorial 08 (grouped GEMM), ported as written: a fixed number of programs (NUM_SM)
// walk the tiles of several matrix products of different sizes; each product's A, B and C are
// reached through tables of int64 addresses cast to pointers, its sizes and leading dimensions
// loaded from small tensors; a runtime loop over the group carries the tile index and the end of
// the previous problem, and a runtime while loop takes this program's tiles of the current one.
// Checked against float64 products on fresh fp16 inputs. Runs on the GPU with `--cuda`; `--bench`
// times a group of four products beside one eager `matmul` per product (the tutorial's benchmark
// against torch.matmul in a loop), autotuned over the tutorial's configs.
//
// Differences from the Python: the tutorial's `tl.multiple_of(a_ptrs, [16, 16])` lines discard
// their result (no effect in Triton either) and hints on pointer tiles are not in tessera yet, so
// they are left out; like the tutorial, every size is a multiple of the blocks (no masks).
#include <cstring>
#include <iostream>
#include <vector>

#include <tessera/autotune.h>
#include <tessera/tessera.h>
#include <tessera/tl.h>
#include <thread>

#include "tutorial_bench.h"

namespace tl = tessera::tl;
using tessera::Tensor;

TL_JIT(grouped_matmul_kernel, tl::Ptr group_a_ptrs, tl::Ptr group_b_ptrs, tl::Ptr group_c_ptrs,
       tl::Ptr group_gemm_sizes, tl::Ptr g_lds, tl::Int group_size, tl::Const NUM_SM,
       tl::Const BLOCK_SIZE_M, tl::Const BLOCK_SIZE_N, tl::Const BLOCK_SIZE_K) {
  tl::Var tile_idx = tl::program_id(0);
  tl::Var last_problem_end = tl::full({}, 0, tl::int32);
  tl::range(0, group_size, [&](tl::Tile g) {
    // The sizes of the current problem.
    auto gm = tl::load(group_gemm_sizes + g * 3);
    auto gn = tl::load(group_gemm_sizes + g * 3 + 1);
    auto gk = tl::load(group_gemm_sizes + g * 3 + 2);
    auto num_m_tiles = tl::cdiv(gm, BLOCK_SIZE_M);
    auto num_n_tiles = tl::cdiv(gn, BLOCK_SIZE_N);
    auto num_tiles = num_m_tiles * num_n_tiles;
    // This program's tiles of the current problem.
    tl::while_(
        [&] { return (tile_idx >= last_problem_end) & (tile_idx < last_problem_end + num_tiles); },
        [&] {
          auto k = gk;
          auto lda = tl::load(g_lds + g * 3);
          auto ldb = tl::load(g_lds + g * 3 + 1);
          auto ldc = tl::load(g_lds + g * 3 + 2);
          auto a_ptr = tl::load(group_a_ptrs + g).to(tl::pointer_type(tl::float16));
          auto b_ptr = tl::load(group_b_ptrs + g).to(tl::pointer_type(tl::float16));
          auto c_ptr = tl::load(group_c_ptrs + g).to(tl::pointer_type(tl::float16));
          // The tile's coordinates.
          auto tile_idx_in_gemm = tile_idx - last_problem_end;
          auto tile_m_idx = tile_idx_in_gemm / num_n_tiles;
          auto tile_n_idx = tile_idx_in_gemm % num_n_tiles;
          // A regular GEMM tile.
          auto offs_am = tile_m_idx * BLOCK_SIZE_M + tl::arange(0, BLOCK_SIZE_M);
          auto offs_bn = tile_n_idx * BLOCK_SIZE_N + tl::arange(0, BLOCK_SIZE_N);
          auto offs_k = tl::arange(0, BLOCK_SIZE_K);
          tl::Var a_ptrs = a_ptr + offs_am[{tl::_, tl::None}] * lda + offs_k[{tl::None, tl::_}];
          tl::Var b_ptrs = b_ptr + offs_k[{tl::_, tl::None}] * ldb + offs_bn[{tl::None, tl::_}];
          tl::Var accumulator = tl::zeros({BLOCK_SIZE_M, BLOCK_SIZE_N}, tl::float32);
          tl::range(0, tl::cdiv(k, BLOCK_SIZE_K), [&](tl::Tile) {
            // Full tiles, as the tutorial assumes.
            auto a = tl::load(a_ptrs);
            auto b = tl::load(b_ptrs);
            accumulator += tl::dot(a, b);
            a_ptrs += BLOCK_SIZE_K;
            b_ptrs += BLOCK_SIZE_K * ldb;
          });
          auto c = accumulator.to(tl::float16);
          auto offs_cm = tile_m_idx * BLOCK_SIZE_M + tl::arange(0, BLOCK_SIZE_M);
          auto offs_cn = tile_n_idx * BLOCK_SIZE_N + tl::arange(0, BLOCK_SIZE_N);
          auto c_ptrs = c_ptr + ldc * offs_cm[{tl::_, tl::None}] + offs_cn[{tl::None, tl::_}];
          tl::store(c_ptrs, c);
          // The next tile of this program.
          tile_idx += NUM_SM;
        });
    // On to the next problem.
    last_problem_end = last_problem_end + num_tiles;
  });
}

int64_t address(const Tensor& t) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
}

// The group's device tables: each problem's A, B, C addresses, sizes and leading dimensions.
struct Group {
  std::vector<Tensor> as, bs, cs;
  Tensor ta, tb, tc, sizes, lds;
};

struct Problem {
  int64_t m, n, k;
};

Group make_group(const std::vector<Problem>& problems, tessera::Device dev) {
  Group g;
  std::vector<int64_t> a_addrs, b_addrs, c_addrs;
  std::vector<int32_t> sizes, lds;
  for (const Problem& p : problems) {
    g.as.push_back(tessera::randn({p.m, p.k}).to(tessera::float16).to(dev));
    g.bs.push_back(tessera::randn({p.k, p.n}).to(tessera::float16).to(dev));
    g.cs.push_back(
        tessera::zeros({p.m, p.n}, tessera::TensorOptions().dtype(tessera::float16).device(dev)));
    a_addrs.push_back(address(g.as.back()));
    b_addrs.push_back(address(g.bs.back()));
    c_addrs.push_back(address(g.cs.back()));
    sizes.insert(sizes.end(),
                 {static_cast<int32_t>(p.m), static_cast<int32_t>(p.n), static_cast<int32_t>(p.k)});
    lds.insert(lds.end(),
               {static_cast<int32_t>(p.k), static_cast<int32_t>(p.n), static_cast<int32_t>(p.n)});
  }
  auto table = [&](const std::vector<int64_t>& v) {
    return tessera::from_vector(v, {static_cast<int64_t>(v.size())}).to(dev);
  };
  g.ta = table(a_addrs), g.tb = table(b_addrs), g.tc = table(c_addrs);
  g.sizes = tessera::from_vector(sizes, {static_cast<int64_t>(sizes.size())}).to(dev);
  g.lds = tessera::from_vector(lds, {static_cast<int64_t>(lds.size())}).to(dev);
  return g;
}

// The tutorial's benchmark: groups of four N x N x N fp16 products, the kernel autotuned over the
// tutorial's configs (NUM_SM 84 and 128 as written, and the machine's own count), beside one eager
// matmul per product.
void bench(const tutorial_bench::Args& args) {
  const int64_t sms = std::max(1u, std::thread::hardware_concurrency());
  auto cfg = [](int64_t bm, int64_t bn, int64_t bk, int64_t num_sm) {
    return tl::Config(
        {{"BLOCK_SIZE_M", bm}, {"BLOCK_SIZE_N", bn}, {"BLOCK_SIZE_K", bk}, {"NUM_SM", num_sm}});
  };
  auto tuned = tl::autotune(grouped_matmul_kernel,
                            {cfg(128, 128, 32, 84), cfg(128, 128, 32, 128), cfg(64, 64, 32, 84),
                             cfg(64, 64, 32, 128), cfg(128, 128, 64, sms), cfg(64, 128, 64, sms)},
                            {"group_size"});
  const tessera::Device dev = args.device();
  tutorial_bench::header();
  for (const int64_t n : {256, 512}) {
    const std::vector<Problem> problems(4, Problem{n, n, n});
    Group g = make_group(problems, dev);
    auto kernel = [&] {
      auto grid = [&](const tl::Meta& m) { return tl::Grid{m["NUM_SM"]}; };
      tuned[grid](g.ta, g.tb, g.tc, g.sizes, g.lds, static_cast<int64_t>(problems.size()));
      return g.cs.back();
    };
    auto eager = [&] {
      Tensor last;
      for (size_t i = 0; i < problems.size(); ++i) last = tessera::matmul(g.as[i], g.bs[i]);
      return last;
    };
    tutorial_bench::row("grouped gemm 4 x " + std::to_string(n) + "^3 float16", args, kernel, eager,
                        4 * 2.0 * n * n * n);
  }
}

int main(int argc, char** argv) {
  const tutorial_bench::Args args = tutorial_bench::parse(argc, argv);
  if (args.bench) return bench(args), 0;
  const tessera::Device dev = args.device();
  const std::vector<Problem> problems = {{64, 64, 64}, {128, 64, 32}, {32, 96, 128}};
  Group group = make_group(problems, dev);
  std::vector<Tensor>&as = group.as, &bs = group.bs, &cs = group.cs;
  Tensor ta = group.ta, tb = group.tb, tc = group.tc, tsizes = group.sizes, tlds = group.lds;
  const int64_t num_sm = 4;
  grouped_matmul_kernel[{num_sm}](ta, tb, tc, tsizes, tlds, static_cast<int64_t>(problems.size()),
                                  tl::meta("NUM_SM", num_sm), tl::meta("BLOCK_SIZE_M", 32),
                                  tl::meta("BLOCK_SIZE_N", 32), tl::meta("BLOCK_SIZE_K", 32));
  bool ok = true;
  for (size_t g = 0; g < problems.size(); ++g) {
    const Tensor ref =
        tessera::matmul(as[g].cpu().to(tessera::float64), bs[g].cpu().to(tessera::float64));
    const bool good = tessera::allclose(cs[g].cpu().to(tessera::float64), ref, 2e-3, 2e-2);
    std::cout << "problem " << g << " (" << problems[g].m << "x" << problems[g].n << "x"
              << problems[g].k << ") on " << dev.str() << ": " << (good ? "matches" : "MISMATCH")
              << "\n";
    ok = ok && good;
  }
  std::cout << (ok ? "tutorial_08_grouped_gemm: OK" : "tutorial_08_grouped_gemm: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
