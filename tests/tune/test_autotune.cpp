// Autotuning and heuristics: every option, both heuristics orders, deduplicated configs, failing
// configs, in-place kernels, the tuning database (persistence across processes, the re-tune rule,
// concurrent writers, the CLI), do_bench and perf_report. Timing is replaced by a scripted
// `do_bench` where the winner must be known; results are always checked against a reference.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "backend/cpu/toolchain.h"
#include "runtime/thread_pool.h"
#include "tessera/autotune.h"
#include "tessera/compile.h"
#include "tessera/env.h"
#include "tessera/tessera.h"
#include "tessera/testing.h"
#include "tessera/tune_db.h"
#include "testing.h"
#include "tune/tune_db.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

TL_JIT(add_kernel, tl::Ptr x_ptr, tl::Ptr y_ptr, tl::Ptr out_ptr, tl::Int n_elements,
       tl::Const BLOCK_SIZE) {
  auto offsets = tl::program_id(0) * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  tl::store(out_ptr + offsets, tl::load(x_ptr + offsets, mask) + tl::load(y_ptr + offsets, mask),
            mask);
}

// In place: x += 1 (reads and writes x).
TL_JIT(inc_kernel, tl::Ptr x_ptr, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(x_ptr + offs, tl::load(x_ptr + offs, mask) + 1.0f, mask);
}

// Accumulates into out: out += x (out must start at zero).
TL_JIT(acc_kernel, tl::Ptr x_ptr, tl::Ptr out_ptr, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(out_ptr + offs, tl::load(out_ptr + offs, mask) + tl::load(x_ptr + offs, mask), mask);
}

// out = x * SCALE, with a heuristic-set flag EVEN (whether n divides by BLOCK: no mask needed).
TL_JIT(scale_kernel, tl::Ptr x_ptr, tl::Ptr out_ptr, tl::Int n, tl::Const BLOCK, tl::Const SCALE,
       tl::Const EVEN) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  if (EVEN) {
    tl::store(out_ptr + offs, tl::load(x_ptr + offs) * SCALE);
  } else {
    auto mask = offs < n;
    tl::store(out_ptr + offs, tl::load(x_ptr + offs, mask) * SCALE, mask);
  }
}

auto grid_of(const SymInt& n) {
  return [n](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK_SIZE"])}; };
}

Tensor rand(int64_t n) {
  return random_tensor({n}, DType::Float32);
}

/** A scripted benchmark: each config's time comes from a table keyed by its BLOCK_SIZE (read by
 * the pre_hook), and every timed config is recorded. */
struct Script {
  std::map<int64_t, double> ms;
  std::vector<int64_t> timed;
  int64_t current = -1;
  std::string block = "BLOCK_SIZE";

  void install(tl::AutotuneOptions& o) {
    o.pre_hook = [this](const tl::Args& a) { current = a[block]; };
    o.do_bench = [this](const std::function<void()>& call) {
      call();
      timed.push_back(current);
      auto it = ms.find(current);
      return it == ms.end() ? 1.0 : it->second;
    };
  }
};

std::vector<tl::Config> seed_configs() {
  // The seed's four configs: BLOCK_SIZE 4 and 2, each with num_warps 4 and 8.
  return {tl::Config({{"BLOCK_SIZE", 4}}, 4, 3), tl::Config({{"BLOCK_SIZE", 4}}, 8, 3),
          tl::Config({{"BLOCK_SIZE", 2}}, 4, 4), tl::Config({{"BLOCK_SIZE", 2}}, 8, 4)};
}

// The child process of PersistsAcrossProcesses: tunes add_kernel over four configs with a
// scripted benchmark and reports how many it timed.
[[maybe_unused]] const int kChild = [] {
  const char* mode = std::getenv("TS_TEST_CHILD");
  if (!mode || std::string(mode) != "tune") return 0;
  Script sc;
  sc.ms = {{8, 4.0}, {16, 3.0}, {32, 2.0}, {64, 1.0}};
  tl::AutotuneOptions o;
  sc.install(o);
  std::vector<tl::Config> cs;
  for (int b : {8, 16, 32, 64}) cs.push_back(tl::Config({{"BLOCK_SIZE", b}}));
  auto tuned = tl::autotune(add_kernel, cs, {"n_elements"}, o);
  const int64_t n = 1000;
  Tensor x = rand(n), y = rand(n), out = empty({n});
  tuned[grid_of(n)](x, y, out, n);
  const bool ok = out.allclose(x + y) && tuned.best_config()->find("BLOCK_SIZE")->i == 64;
  std::printf("timed=%zu %s\n", sc.timed.size(), ok ? "ok" : "WRONG");
  std::fflush(stdout);
  std::_Exit(ok ? 0 : 1);
}();

/** Each test gets a fresh cache directory (kernels and the tuning database). */
class Autotune : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = knobs().cache_dir;
    char tmpl[] = "/tmp/tessera-tune-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::setenv("TESSERA_CACHE_DIR", dir_.c_str(), 1);
    reload_knobs();
  }
  void TearDown() override {
    tune::clear();
    backend::cpu::clear_cache();
    std::system(("rm -rf '" + dir_ + "'").c_str());
    ::setenv("TESSERA_CACHE_DIR", saved_.c_str(), 1);
    reload_knobs();
  }
  std::string dir_, saved_;
};

TEST_F(Autotune, SeedConfigsDeduplicatedAndChosenOncePerKey) {
  Script sc;
  sc.ms = {{4, 2.0}, {2, 1.0}};
  tl::AutotuneOptions o;
  sc.install(o);
  auto tuned = tl::autotune(add_kernel, seed_configs(), {}, o);
  const int64_t n = 37;
  Tensor x = rand(n), y = rand(n), out = empty({n});
  poison(out);
  tuned[grid_of(n)](x, y, out, n);
  EXPECT_TRUE(all_close(out, x + y));
  // num_warps does not change the CPU code: two distinct kernels were timed, not four.
  EXPECT_EQ(sc.timed.size(), 2u);
  ASSERT_TRUE(tuned.best_config().has_value());
  EXPECT_EQ(tuned.best_config()->find("BLOCK_SIZE")->i, 2);
  EXPECT_EQ(tuned.last_timings().size(), 4u);  // the duplicates share their representative's time
  EXPECT_EQ(tuned.tuning_rounds(), 1);
  // Same key (key=[]): no new round, still right.
  Tensor x2 = rand(n), y2 = rand(n), out2 = empty({n});
  poison(out2);
  tuned[grid_of(n)](x2, y2, out2, n);
  EXPECT_TRUE(all_close(out2, x2 + y2));
  EXPECT_EQ(tuned.tuning_rounds(), 1);
  EXPECT_EQ(sc.timed.size(), 2u);
}

TEST_F(Autotune, KeyValuesDtypesAndAlignmentMakeNewRounds) {
  Script sc;
  tl::AutotuneOptions o;
  sc.install(o);
  auto tuned = tl::autotune(add_kernel,
                            {tl::Config({{"BLOCK_SIZE", 64}}), tl::Config({{"BLOCK_SIZE", 128}})},
                            {"n_elements"}, o);
  auto run = [&](int64_t n, DType dt) {
    Tensor x = random_tensor({n}, dt), y = random_tensor({n}, dt), out = empty({n}, dt);
    tuned[grid_of(n)](x, y, out, n);
    EXPECT_TRUE(all_close(out, x + y));
  };
  run(100, DType::Float32);
  EXPECT_EQ(tuned.tuning_rounds(), 1);
  run(100, DType::Float32);
  EXPECT_EQ(tuned.tuning_rounds(), 1);
  run(200, DType::Float32);  // a new key value
  EXPECT_EQ(tuned.tuning_rounds(), 2);
  run(200, DType::Float64);  // a new dtype
  EXPECT_EQ(tuned.tuning_rounds(), 3);
  // A view whose data is not 16-byte aligned: a different specialization, a new round.
  Tensor base = rand(201), yb = rand(201), out = empty({200});
  Tensor x = base.slice(0, 1, 201), y = yb.slice(0, 1, 201);
  tuned[grid_of(200)](x, y, out, 200);
  EXPECT_TRUE(all_close(out, x + y));
  EXPECT_EQ(tuned.tuning_rounds(), 4);
}

TEST_F(Autotune, RealTimingPicksATimedConfig) {
  tl::AutotuneOptions o;
  o.warmup = 1;
  o.rep = 3;
  auto tuned = tl::autotune(add_kernel,
                            {tl::Config({{"BLOCK_SIZE", 16}}), tl::Config({{"BLOCK_SIZE", 256}}),
                             tl::Config({{"BLOCK_SIZE", 1024}})},
                            {"n_elements"}, o);
  const int64_t n = 5000;
  Tensor x = rand(n), y = rand(n), out = empty({n});
  poison(out);
  tuned[grid_of(n)](x, y, out, n);
  EXPECT_TRUE(all_close(out, x + y));
  const auto t = tuned.last_timings();
  ASSERT_EQ(t.size(), 3u);
  double best = 1e300;
  for (const auto& [c, ms] : t) {
    EXPECT_GT(ms, 0);
    best = std::min(best, ms);
  }
  for (const auto& [c, ms] : t) {
    if (c == *tuned.best_config()) {
      EXPECT_EQ(ms, best);
    }
  }
}

TEST_F(Autotune, HeuristicsAlone) {
  std::vector<int64_t> seen;
  auto k = tl::heuristics(
      scale_kernel, {{"BLOCK", [](const tl::Args& a) { return int64_t(a["n"] >= 64 ? 64 : 16); }},
                     {"EVEN", [&](const tl::Args& a) {
                        seen.push_back(a["BLOCK"]);  // sees the heuristic before it
                        return a["n"] % a["BLOCK"] == 0;
                      }}});
  for (int64_t n : {48, 100, 128}) {
    Tensor x = rand(n), out = empty({n});
    poison(out);
    k[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](
        x, out, n, tl::meta("SCALE", 2.0));
    EXPECT_TRUE(all_close(out, x * 2.0)) << n;
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{16, 64, 64}));
}

TEST_F(Autotune, HeuristicsInsideAutotuneSeeEachConfig) {
  // autotune(heuristics(k)): the heuristic runs per config and sees its BLOCK.
  std::vector<int64_t> seen;
  auto inner = tl::heuristics(scale_kernel, {{"EVEN", [&](const tl::Args& a) {
                                                seen.push_back(a["BLOCK"]);
                                                return a["n"] % a["BLOCK"] == 0;
                                              }}});
  Script sc;
  sc.block = "BLOCK";
  tl::AutotuneOptions o;
  sc.install(o);
  auto tuned =
      tl::autotune(inner, {tl::Config({{"BLOCK", 16}}), tl::Config({{"BLOCK", 32}})}, {"n"}, o);
  const int64_t n = 48;  // divisible by 16, not by 32
  Tensor x = rand(n), out = empty({n});
  poison(out);
  tuned[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](
      x, out, n, tl::meta("SCALE", 3.0));
  EXPECT_TRUE(all_close(out, x * 3.0));
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen[0], 16);
  EXPECT_EQ(seen[1], 32);
  EXPECT_EQ(sc.timed.size(), 2u);  // EVEN differs, so the two configs are different code
}

TEST_F(Autotune, HeuristicsOutsideAutotuneRunBeforeTuning) {
  // heuristics(autotune(k)): the heuristic runs once per launch and does not see the config.
  int calls = 0;
  bool saw_block = true;
  Script sc;
  sc.block = "BLOCK";
  tl::AutotuneOptions o;
  sc.install(o);
  auto tuned = tl::autotune(scale_kernel,
                            {tl::Config({{"BLOCK", 16}}), tl::Config({{"BLOCK", 32}})}, {"n"}, o);
  auto k = tl::heuristics(tuned, {{"EVEN", [&](const tl::Args& a) {
                                     ++calls;
                                     saw_block = a.contains("BLOCK");
                                     return false;
                                   }}});
  const int64_t n = 50;
  Tensor x = rand(n), out = empty({n});
  poison(out);
  k[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](x, out, n,
                                                                            tl::meta("SCALE", 0.5));
  EXPECT_TRUE(all_close(out, x * 0.5));
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(saw_block);
}

TEST_F(Autotune, ConflictsAndBadNamesAreClearErrors) {
  auto tuned = tl::autotune(add_kernel, {tl::Config({{"BLOCK_SIZE", 4}})}, {});
  Tensor x = rand(8), y = rand(8), out = empty({8});
  auto msg = error_of<CompileError>([&] { tuned[{2}](x, y, out, 8, tl::meta("BLOCK_SIZE", 4)); });
  EXPECT_NE(msg.find("add_kernel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'BLOCK_SIZE' is set by the launch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_autotune.cpp"), std::string::npos) << msg;
  msg = error_of<ValueError>([&] { tl::autotune(add_kernel, {tl::Config({{"BLOCK", 4}})}, {}); });
  EXPECT_NE(msg.find("sets 'BLOCK', which is not a parameter"), std::string::npos) << msg;
  msg = error_of<ValueError>([&] {
    tl::autotune(add_kernel, {tl::Config({{"BLOCK_SIZE", 4}})}, {"n"});
  });
  EXPECT_NE(msg.find("the autotuning key names 'n'"), std::string::npos) << msg;
  msg = error_of<ValueError>([&] {
    tl::heuristics(add_kernel, {{"BLOCK", [](const tl::Args&) { return tl::MetaValue(4); }}});
  });
  EXPECT_NE(msg.find("heuristic 'BLOCK' is not a parameter"), std::string::npos) << msg;
  msg = error_of<CompileError>([&] { tl::autotune(tuned, {tl::Config({{"BLOCK_SIZE", 8}})}, {}); });
  EXPECT_NE(msg.find("autotuned twice"), std::string::npos) << msg;
  msg = error_of<ValueError>([&] {
    tl::AutotuneOptions o;
    o.reset_to_zero = {"n_elements"};
    tl::autotune(add_kernel, {tl::Config({{"BLOCK_SIZE", 4}})}, {}, o);
  });
  EXPECT_NE(msg.find("not a pointer parameter"), std::string::npos) << msg;
  msg = error_of<ValueError>([&] {
    tl::autotune(add_kernel, {tl::Config({{"BLOCK_SIZE", 4}}), tl::Config({{"BLOCK_SIZE", 4}})},
                 {});
  });
  EXPECT_NE(msg.find("listed twice"), std::string::npos) << msg;
}

TEST_F(Autotune, FailingConfigsAreSkippedWithTheirReasons) {
  Script sc;
  tl::AutotuneOptions o;
  sc.install(o);
  // BLOCK_SIZE 3 is not a power of 2: tl::arange rejects it while tracing.
  auto tuned = tl::autotune(
      add_kernel, {tl::Config({{"BLOCK_SIZE", 3}}), tl::Config({{"BLOCK_SIZE", 8}})}, {}, o);
  const int64_t n = 20;
  Tensor x = rand(n), y = rand(n), out = empty({n});
  poison(out);
  tuned[grid_of(n)](x, y, out, n);
  EXPECT_TRUE(all_close(out, x + y));
  EXPECT_EQ(tuned.best_config()->find("BLOCK_SIZE")->i, 8);
  EXPECT_EQ(sc.timed, (std::vector<int64_t>{8}));

  auto all_bad = tl::autotune(
      add_kernel, {tl::Config({{"BLOCK_SIZE", 3}}), tl::Config({{"BLOCK_SIZE", 6}})}, {}, o);
  const auto msg = error_of<CompileError>([&] { all_bad[grid_of(n)](x, y, out, n); });
  EXPECT_NE(msg.find("every autotuning config failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("BLOCK_SIZE: 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("BLOCK_SIZE: 6"), std::string::npos) << msg;
  EXPECT_NE(msg.find("power of 2"), std::string::npos) << msg;
}

TEST_F(Autotune, FailingTrialsCallPostHookWithTheException) {
  int failures = 0, successes = 0;
  tl::AutotuneOptions o;
  o.warmup = 1;
  o.rep = 2;
  o.post_hook = [&](const tl::Args&, std::exception_ptr e) { (e ? failures : successes)++; };
  tl::Config bad({{"BLOCK_SIZE", 16}});
  bad.pre_hook = [](const tl::Args&) { throw std::runtime_error("this config cannot run here"); };
  auto tuned = tl::autotune(add_kernel, {bad, tl::Config({{"BLOCK_SIZE", 32}})}, {}, o);
  const int64_t n = 100;
  Tensor x = rand(n), y = rand(n), out = empty({n});
  tuned[grid_of(n)](x, y, out, n);
  EXPECT_TRUE(all_close(out, x + y));
  EXPECT_EQ(failures, 1);
  EXPECT_GT(successes, 0);
  EXPECT_EQ(tuned.best_config()->find("BLOCK_SIZE")->i, 32);
}

TEST_F(Autotune, InPlaceKernelIsRightAfterTuning) {
  // No restore_value: tessera restores what the kernel reads and writes (from its IR).
  tl::AutotuneOptions o;
  o.warmup = 1;
  o.rep = 2;
  auto tuned = tl::autotune(inc_kernel, {tl::Config({{"BLOCK", 16}}), tl::Config({{"BLOCK", 64}})},
                            {"n"}, o);
  const int64_t n = 300;
  Tensor x = rand(n);
  Tensor x0 = x.clone();
  tuned[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](x, n);
  EXPECT_TRUE(all_close(x, x0 + 1.0));
  // With the automatic restore off and no restore_value, the trials corrupt x (as in Triton).
  o.restore_written = false;
  o.cache_results = false;  // (the database already knows this key: nothing would be timed)
  auto unsafe = tl::autotune(inc_kernel, {tl::Config({{"BLOCK", 16}}), tl::Config({{"BLOCK", 64}})},
                             {"n"}, o);
  Tensor z = rand(n), z0 = z.clone();
  unsafe[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](z, n);
  EXPECT_FALSE(z.allclose(z0 + 1.0));
  // ... and restore_value fixes it.
  o.restore_value = {"x_ptr"};
  auto named = tl::autotune(inc_kernel, {tl::Config({{"BLOCK", 16}}), tl::Config({{"BLOCK", 64}})},
                            {"n"}, o);
  Tensor w = rand(n), w0 = w.clone();
  named[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](w, n);
  EXPECT_TRUE(all_close(w, w0 + 1.0));
}

TEST_F(Autotune, ResetToZeroAccumulators) {
  tl::AutotuneOptions o;
  o.warmup = 1;
  o.rep = 2;
  o.reset_to_zero = {"out_ptr"};
  auto tuned = tl::autotune(acc_kernel, {tl::Config({{"BLOCK", 16}}), tl::Config({{"BLOCK", 32}})},
                            {"n"}, o);
  const int64_t n = 100;
  Tensor x = rand(n), out = zeros({n});
  tuned[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](x, out, n);
  EXPECT_TRUE(all_close(out, x));
  // Without it, the trials accumulate.
  o.reset_to_zero.clear();
  o.restore_written = false;
  o.cache_results = false;
  auto bad = tl::autotune(acc_kernel, {tl::Config({{"BLOCK", 16}}), tl::Config({{"BLOCK", 32}})},
                          {"n"}, o);
  Tensor out2 = zeros({n});
  bad[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](x, out2, n);
  EXPECT_FALSE(out2.allclose(x));
}

TEST_F(Autotune, PreAndPostHooksRunAroundEveryTrialWithResetToZero) {
  // Triton replaces reset_to_zero by a user pre_hook; tessera runs both.
  int pre = 0, post = 0;
  bool zero_before_hook = true;
  tl::AutotuneOptions o;
  o.warmup = 1;
  o.rep = 2;
  o.reset_to_zero = {"out_ptr"};
  o.pre_hook = [&](const tl::Args& a) {
    ++pre;
    if (a.tensor("out_ptr").abs().max().item<float>() != 0.0f) zero_before_hook = false;
  };
  o.post_hook = [&](const tl::Args&, std::exception_ptr) { ++post; };
  auto tuned = tl::autotune(acc_kernel, {tl::Config({{"BLOCK", 16}}), tl::Config({{"BLOCK", 32}})},
                            {"n"}, o);
  const int64_t n = 64;
  Tensor x = rand(n), out = zeros({n});
  tuned[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](x, out, n);
  EXPECT_TRUE(all_close(out, x));
  EXPECT_GT(pre, 2);
  EXPECT_EQ(pre, post);
  EXPECT_TRUE(zero_before_hook);
}

TEST_F(Autotune, PruneConfigsBy) {
  Script sc;
  tl::AutotuneOptions o;
  sc.install(o);
  o.prune_configs_by.early_config_prune = [](const std::vector<tl::Config>& cs, const tl::Args& a) {
    std::vector<tl::Config> keep;
    for (const auto& c : cs) {
      if (c.find("BLOCK_SIZE")->i <= a["n_elements"]) keep.push_back(c);  // no block larger than n
    }
    return keep;
  };
  std::vector<tl::Config> cs;
  for (int b : {8, 16, 32, 64, 128}) cs.push_back(tl::Config({{"BLOCK_SIZE", b}}));
  auto tuned = tl::autotune(add_kernel, cs, {"n_elements"}, o);
  const int64_t n = 40;
  Tensor x = rand(n), y = rand(n), out = empty({n});
  tuned[grid_of(n)](x, y, out, n);
  EXPECT_TRUE(all_close(out, x + y));
  EXPECT_EQ(sc.timed, (std::vector<int64_t>{8, 16, 32}));

  // perf_model + top_k: only the best predicted are timed.
  Script sc2;
  tl::AutotuneOptions o2;
  sc2.install(o2);
  o2.prune_configs_by.perf_model = [](const tl::Config& c, const tl::Args&) {
    return std::abs(static_cast<double>(c.find("BLOCK_SIZE")->i) - 32);
  };
  o2.prune_configs_by.top_k = 2;
  o2.cache_results = false;  // time again what the first tuner recorded
  auto tuned2 = tl::autotune(add_kernel, cs, {"n_elements"}, o2);
  tuned2[grid_of(n)](x, y, out, n);
  EXPECT_TRUE(all_close(out, x + y));
  ASSERT_EQ(sc2.timed.size(), 2u);
  EXPECT_EQ(sc2.timed[0], 32);
  // A fraction keeps that share of the configs (at least one).
  Script sc3;
  tl::AutotuneOptions o3 = o2;
  sc3.install(o3);
  o3.prune_configs_by.top_k = 0.2;
  auto tuned3 = tl::autotune(add_kernel, cs, {"n_elements"}, o3);
  tuned3[grid_of(n)](x, y, out, n);
  EXPECT_EQ(sc3.timed, (std::vector<int64_t>{32}));
}

TEST_F(Autotune, DatabaseHitTimesNothingAndAddingAConfigRetimesOnlyItAndTheIncumbent) {
  Script sc;
  sc.ms = {{8, 3.0}, {16, 2.0}, {32, 1.5}, {64, 4.0}};
  tl::AutotuneOptions o;
  sc.install(o);
  std::vector<tl::Config> cs = {tl::Config({{"BLOCK_SIZE", 8}}), tl::Config({{"BLOCK_SIZE", 16}}),
                                tl::Config({{"BLOCK_SIZE", 64}})};
  const int64_t n = 70;
  Tensor x = rand(n), y = rand(n), out = empty({n});
  {
    auto tuned = tl::autotune(add_kernel, cs, {"n_elements"}, o);
    tuned[grid_of(n)](x, y, out, n);
    EXPECT_EQ(sc.timed, (std::vector<int64_t>{8, 16, 64}));
  }
  EXPECT_EQ(tune::all().size(), 3u);
  sc.timed.clear();
  {
    // A new tuner (a new process reads the same records): nothing is timed.
    auto tuned = tl::autotune(add_kernel, cs, {"n_elements"}, o);
    poison(out);
    tuned[grid_of(n)](x, y, out, n);
    EXPECT_TRUE(all_close(out, x + y));
    EXPECT_TRUE(sc.timed.empty());
    EXPECT_EQ(tuned.last_round_timed(), 0);
    EXPECT_EQ(tuned.best_config()->find("BLOCK_SIZE")->i, 16);
  }
  {
    // One more config: it is timed with the incumbent (16), not the others.
    auto more = cs;
    more.push_back(tl::Config({{"BLOCK_SIZE", 32}}));
    auto tuned = tl::autotune(add_kernel, more, {"n_elements"}, o);
    poison(out);
    tuned[grid_of(n)](x, y, out, n);
    EXPECT_TRUE(all_close(out, x + y));
    EXPECT_EQ(sc.timed, (std::vector<int64_t>{32, 16}));
    EXPECT_EQ(tuned.best_config()->find("BLOCK_SIZE")->i, 32);
  }
  // cache_results=false neither reads nor writes it: with other times and one more config,
  // every config is timed, the new times pick the winner, and the records stay as they were.
  const std::string records = tune::to_text(tune::all());
  ASSERT_EQ(tune::all().size(), 4u);
  sc.timed.clear();
  sc.ms = {{8, 0.5}, {16, 2.0}, {32, 1.5}, {64, 4.0}, {128, 3.0}};
  o.cache_results = false;
  auto others = cs;
  others.push_back(tl::Config({{"BLOCK_SIZE", 128}}));
  auto fresh = tl::autotune(add_kernel, others, {"n_elements"}, o);
  poison(out);
  fresh[grid_of(n)](x, y, out, n);
  EXPECT_TRUE(all_close(out, x + y));
  EXPECT_EQ(sc.timed, (std::vector<int64_t>{8, 16, 64, 128}));
  EXPECT_EQ(fresh.best_config()->find("BLOCK_SIZE")->i, 8);
  EXPECT_EQ(tune::to_text(tune::all()), records);
}

TEST_F(Autotune, DatabaseRecordsRoundTripAndDamagedRecordsAreIgnored) {
  tune::Record r{"k",
                 "BLOCK: 4, num_warps: 4, num_stages: 3",
                 "n=5 dtypes=float32 spec=a",
                 "cpu:x",
                 "abc",
                 0.25,
                 7};
  tune::put(r);
  auto f = tune::find(r);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->ms, 0.25);
  const auto text = tune::to_text(tune::all());
  EXPECT_EQ(tune::from_text(text).size(), 1u);
  EXPECT_NE(
      error_of<ValueError>([&] { tune::from_text("k\tonly three\tfields\n"); }).find("line 1"),
      std::string::npos);
  // Truncate the record's file: it is ignored, not trusted.
  const std::string path = tune::root() + "/" + r.id().substr(0, 2) + "/" + r.id();
  std::ofstream(path, std::ios::trunc) << "k\tBLOCK";
  EXPECT_FALSE(tune::find(r).has_value());
  EXPECT_TRUE(tune::all().empty());
  EXPECT_EQ(tune::clear(), 0u);
}

// The public API (tessera/tune_db.h): the records a tuner wrote, exported, cleared and imported
// back equal; a malformed import keeps nothing.
TEST_F(Autotune, ThePublicTuningDatabaseApiListsExportsAndImports) {
  const std::vector<tl::Config> configs = {tl::Config({{"BLOCK_SIZE", 16}}),
                                           tl::Config({{"BLOCK_SIZE", 64}})};
  auto tuned = tl::autotune(add_kernel, configs, {"n_elements"});
  Tensor x = randn({1000}), y = randn({1000}), out = empty({1000});
  auto grid = [](const tl::Meta& m) { return tl::Grid{tl::cdiv(1000, m["BLOCK_SIZE"])}; };
  tuned[grid](x, y, out, 1000);
  const std::vector<tune_db::Record> written = tune_db::records();
  ASSERT_EQ(written.size(), 2u);
  for (const auto& r : written) {
    EXPECT_EQ(r.kernel, "add_kernel");
    EXPECT_GT(r.ms, 0);
    EXPECT_NE(r.key.find("n_elements=1000"), std::string::npos) << r.key;
  }
  const std::string text = tune_db::export_text();
  EXPECT_EQ(tune_db::parse_text(text).size(), 2u);
  EXPECT_EQ(tune_db::clear(), 2u);
  EXPECT_TRUE(tune_db::records().empty());
  const std::string bad = text + "add_kernel\tonly\tfour\tfields\n";
  EXPECT_NE(error_of<ValueError>([&] { tune_db::import_text(bad); }).find("line 4"),
            std::string::npos);
  EXPECT_TRUE(tune_db::records().empty());  // nothing of a bad import is kept
  EXPECT_EQ(tune_db::import_text(text), 2u);
  std::set<std::string> before, after;
  for (const auto& r : written) before.insert(r.id() + r.config + std::to_string(r.ms));
  for (const auto& r : tune_db::records()) after.insert(r.id() + r.config + std::to_string(r.ms));
  EXPECT_EQ(before, after);
  // A new tuner finds the imported timings and times nothing.
  auto again = tl::autotune(add_kernel, configs, {"n_elements"});
  again[grid](x, y, out, 1000);
  EXPECT_EQ(again.last_round_timed(), 0);
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
  ::pclose(p);
  return out;
}

TEST_F(Autotune, PersistsAcrossProcessesAndConcurrentWritersAreSafe) {
  // Two processes tune at once into the same database; a third finds every timing and times
  // nothing.
  const std::string child = "TS_TEST_CHILD=tune /proc/" + std::to_string(::getpid()) + "/exe";
  // Both children must exit 0 having printed "ok" (a crashed child fails the test).
  const std::string both = run_capture("(" + child + " & a=$!; " + child + " & b=$!; wait $a; " +
                                       "sa=$?; wait $b; echo \"status=$sa,$?\") 2>&1");
  EXPECT_NE(both.find("status=0,0"), std::string::npos) << both;
  size_t oks = 0;
  for (size_t p = both.find(" ok"); p != std::string::npos; p = both.find(" ok", p + 1)) ++oks;
  EXPECT_EQ(oks, 2u) << both;
  EXPECT_NE(both.find("timed=4"), std::string::npos) << both;
  const std::string third = run_capture(child + " 2>&1");
  EXPECT_EQ(both.find("WRONG"), std::string::npos) << both;
  EXPECT_NE(third.find("timed=0"), std::string::npos) << third;
  EXPECT_NE(third.find("ok"), std::string::npos) << third;
  EXPECT_EQ(tune::all().size(), 4u);
  // The CLI lists, exports, clears and imports them.
  const std::string cli = TESSERA_CLI;
  EXPECT_NE(run_capture(cli + " tune-db ls").find("BLOCK_SIZE: 64"), std::string::npos);
  const std::string file = dir_ + "/exported.tsv";
  run_capture(cli + " tune-db export " + file);
  EXPECT_NE(run_capture(cli + " tune-db clear").find("removed 4 records"), std::string::npos);
  EXPECT_TRUE(tune::all().empty());
  EXPECT_NE(run_capture(cli + " tune-db import " + file).find("imported 4 records"),
            std::string::npos);
  EXPECT_EQ(tune::all().size(), 4u);
  EXPECT_NE(run_capture(child + " 2>&1").find("timed=0"), std::string::npos);
}

// stderr of a tuning round of the seed's configs with scripted times (BLOCK_SIZE 2 fastest).
std::string scripted_round_stderr() {
  Script sc;
  sc.ms = {{4, 2.0}, {2, 1.0}};
  tl::AutotuneOptions o;
  sc.install(o);
  auto tuned = tl::autotune(add_kernel, seed_configs(), {}, o);
  Tensor x = rand(9), y = rand(9), out = empty({9});
  ::testing::internal::CaptureStderr();
  tuned[grid_of(9)](x, y, out, 9);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(all_close(out, x + y));
  return err;
}

TEST_F(Autotune, PrintAutotuning) {
  std::string err;
  {
    ScopedEnv print("TESSERA_PRINT_AUTOTUNING", "1");
    err = scripted_round_stderr();
  }
  EXPECT_NE(err.find("[tessera autotune] add_kernel"), std::string::npos) << err;
  EXPECT_NE(err.find("BLOCK_SIZE: 2, num_warps: 4, num_stages: 4: 1 ms"), std::string::npos) << err;
  EXPECT_NE(err.find("same code as BLOCK_SIZE: 4, num_warps: 4"), std::string::npos) << err;
  EXPECT_NE(err.find("best: BLOCK_SIZE: 2, num_warps: 4, num_stages: 4"), std::string::npos) << err;
}

// TESSERA_PROGRESS (issue 20): the compile batch and the timing each report, with the best so
// far; `0` silences both. (`auto` shows only on a terminal after a second: not a test's stderr.)
TEST_F(Autotune, ProgressLinesOfCompileBatchAndTiming) {
  auto round = [&](const char* mode) {
    ScopedEnv progress("TESSERA_PROGRESS", mode);
    tune::clear();
    std::system(("rm -rf '" + dir_ + "'/*").c_str());  // compile again:
    add_kernel.clear_memory_cache();                   // not from disk, not from memory
    backend::cpu::clear_cache();
    return scripted_round_stderr();
  };
  const std::string quiet = round("0");
  EXPECT_EQ(quiet.find("[tessera]"), std::string::npos) << quiet;
  const std::string err = round("always");
  if (!knobs().interpret) {  // the interpreter compiles nothing
    EXPECT_NE(err.find("[tessera] compiling 2 kernels (add_kernel, ...): 2/2 built"),
              std::string::npos)
        << err;
  }
  // The last line of the round: everything timed, the best config and its time.
  EXPECT_NE(err.find("[tessera] autotune add_kernel: compiled 4, timed 2/2, best BLOCK_SIZE: 2, "
                     "num_warps: 4, num_stages: 4 1 ms\n"),
            std::string::npos)
      << err;
}

TEST_F(Autotune, MaxnregIsCheckedAndSaysItChangesNothingOnTheCpu) {
  EXPECT_NE(error_of<ValueError>([] {
              tl::Config({{"BLOCK_SIZE", 8}}, 4, 3, 0);
            }).find("maxnreg"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] {
              tl::Config({{"BLOCK_SIZE", 8}}, 4, 3, 256);
            }).find("1..255"),
            std::string::npos);
  const tl::Config with_limit({{"BLOCK_SIZE", 8}}, 4, 3, 128);
  EXPECT_EQ(with_limit.str(), "BLOCK_SIZE: 8, num_warps: 4, num_stages: 3, maxnreg: 128");
  ::testing::internal::CaptureStderr();
  auto tuned = tl::autotune(add_kernel, {with_limit, tl::Config({{"BLOCK_SIZE", 16}})}, {});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("maxnreg limits registers on CUDA GPUs only"), std::string::npos) << err;
  Tensor x = rand(40), y = rand(40), out = empty({40});
  tuned[grid_of(40)](x, y, out, 40);
  EXPECT_TRUE(all_close(out, x + y));
}

TEST_F(Autotune, LaunchOptionsReachTheIrAndTheKey) {
  // A config's maxnreg, and tl::num_warps / num_stages / maxnreg at a launch, are attributes of
  // the kernel's IR and part of its specialization.
  auto tuned = tl::autotune(add_kernel, {tl::Config({{"BLOCK_SIZE", 8}}, 2, 5, 96)}, {});
  Tensor x = rand(40), y = rand(40), out = empty({40});
  tuned[grid_of(40)](x, y, out, 40);
  EXPECT_TRUE(all_close(out, x + y));
  EXPECT_NE(add_kernel.last_ir().find("attributes {num_warps = 2, num_stages = 5, maxnreg = 96"),
            std::string::npos)
      << add_kernel.last_ir();
  const auto launch = [&](int64_t nreg) {
    add_kernel[grid_of(40)](x, y, out, 40, tl::meta("BLOCK_SIZE", 8), tl::num_warps(8),
                            tl::num_stages(1), tl::maxnreg(nreg));
  };
  launch(40);
  EXPECT_NE(add_kernel.last_ir().find("num_warps = 8, num_stages = 1, maxnreg = 40"),
            std::string::npos)
      << add_kernel.last_ir();
  launch(41);  // another limit is another specialization (its IR is the last one made)
  EXPECT_NE(add_kernel.last_ir().find("maxnreg = 41"), std::string::npos) << add_kernel.last_ir();
  EXPECT_TRUE(all_close(out, x + y));
  const auto bad = [&](tl::LaunchOption o) {
    return error_of<CompileError>(
        [&] { add_kernel[grid_of(40)](x, y, out, 40, tl::meta("BLOCK_SIZE", 8), o); });
  };
  EXPECT_NE(bad(tl::num_warps(3)).find("num_warps must be a power of 2 in 1..32, got 3"),
            std::string::npos);
  EXPECT_NE(bad(tl::num_stages(0)).find("num_stages must be >= 1"), std::string::npos);
  const std::string e = bad(tl::maxnreg(300));
  EXPECT_NE(e.find("[kernel add_kernel]"), std::string::npos) << e;
  EXPECT_NE(e.find("1..255, got 300"), std::string::npos) << e;
  EXPECT_NE(e.find("test_autotune.cpp"), std::string::npos) << e;
}

TEST_F(Autotune, ConfigsCompileInOneBatch) {
  // Fresh kernels (a new cache directory): all configs are compiled before any is timed.
  const int threads = runtime::num_threads();
  runtime::set_num_threads(2);
  struct Restore {
    int n;
    ~Restore() { runtime::set_num_threads(n); }
  } restore{threads};
  Script sc;
  tl::AutotuneOptions o;
  sc.install(o);
  add_kernel.clear_memory_cache();
  backend::cpu::forget_loaded();
  backend::cpu::clear_cache();
  std::vector<tl::Config> cs;
  for (int b : {8, 16, 32, 64}) cs.push_back(tl::Config({{"BLOCK_SIZE", b}}));
  auto tuned = tl::autotune(add_kernel, cs, {"n_elements"}, o);
  size_t built_before_first_timing = 0;
  o.do_bench = [&](const std::function<void()>& call) {
    if (built_before_first_timing == 0)
      built_before_first_timing = add_kernel.num_specializations();
    call();
    return 1.0;
  };
  tuned = tl::autotune(add_kernel, cs, {"n_elements"}, o);
  Tensor x = rand(50), y = rand(50), out = empty({50});
  tuned[grid_of(50)](x, y, out, 50);
  EXPECT_TRUE(all_close(out, x + y));
  EXPECT_EQ(built_before_first_timing, 4u);
  // Each kernel has its own cache entry; entries built in one translation unit share one shared
  // object (hard links to one file). With a pool of two threads the four configs are two
  // translation units: two objects (compiled one by one, they would be four).
  const auto entries = backend::cpu::cache_entries();
  ASSERT_EQ(entries.size(), 4u);
  std::set<std::pair<dev_t, ino_t>> objects;
  for (const auto& e : entries) {
    struct stat st;
    ASSERT_EQ(::stat(e.so.c_str(), &st), 0) << e.so;
    objects.insert({st.st_dev, st.st_ino});
  }
  EXPECT_EQ(objects.size(), 2u);
}

// ---- inside tessera::compile
// -------------------------------------------------------------------------

TEST_F(Autotune, InsideCompileTunesOncePerKeyAndRecordsTheChoiceInTheGraph) {
  Script sc;
  sc.ms = {{4, 2.0}, {2, 1.0}};
  tl::AutotuneOptions o;
  sc.install(o);
  auto tuned = tl::autotune(add_kernel, seed_configs(), {"n_elements"}, o);
  auto fn = [&](const Tensor& x, const Tensor& y) {
    Tensor out = zeros_like(x);
    auto n = out.numel();
    tuned[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK_SIZE"])}; })](x, y, out,
                                                                                       n);
    return out;
  };
  CompileOptions opts;
  opts.fullgraph = true;
  opts.name = "tuned_add";
  auto compiled = tessera::compile(fn, opts);
  Tensor x = rand(10), y = rand(10);
  EXPECT_TRUE(all_close(compiled(x, y), x + y));
  EXPECT_EQ(tuned.tuning_rounds(), 1);
  EXPECT_EQ(sc.timed.size(), 2u);  // four configs, two distinct kernels
  const std::string g = compiled.stats().last_graph;
  // Each config's grid is in the graph, evaluated symbolically.
  EXPECT_NE(
      g.find("kernel add_kernel tuned over {BLOCK_SIZE=4, num_warps=4, num_stages=3: [3, 1, 1]"),
      std::string::npos)
      << g;
  EXPECT_NE(g.find("BLOCK_SIZE=2, num_warps=8, num_stages=4: [5, 1, 1]"), std::string::npos) << g;
  // Same key: no tuning; a new size recompiles as dynamic and tunes once for the new key.
  Tensor x1 = rand(10), y1 = rand(10);
  EXPECT_TRUE(all_close(compiled(x1, y1), x1 + y1));
  EXPECT_EQ(tuned.tuning_rounds(), 1);
  for (int64_t n : {33, 34, 33}) {
    Tensor a = rand(n), b = rand(n);
    EXPECT_TRUE(all_close(compiled(a, b), a + b)) << n;
  }
  EXPECT_EQ(compiled.stats().graphs, 2);
  EXPECT_EQ(tuned.tuning_rounds(), 3);  // keys 10, 33, 34
  const std::string dyn = compiled.stats().last_graph;
  EXPECT_NE(dyn.find("BLOCK_SIZE=2, num_warps=4, num_stages=4: [(s0 + 1)//2, 1, 1]"),
            std::string::npos)
      << dyn;
}

TEST_F(Autotune, HeuristicsInsideCompileGuardTheSizesTheyRead) {
  auto k =
      tl::heuristics(scale_kernel, {{"BLOCK", [](const tl::Args&) { return int64_t(16); }},
                                    // sym() keeps n symbolic: the guard is on n % 16 alone
                                    // (a["n"] would specialize n to its value).
                                    {"EVEN", [](const tl::Args& a) {
                                       return static_cast<bool>(mod(a.sym("n"), a["BLOCK"]) == 0);
                                     }}});
  auto fn = [&](const Tensor& x) {
    Tensor out = empty_like(x);
    auto n = x.numel();
    k[([&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; })](
        x, out, n, tl::meta("SCALE", 2.0));
    return out;
  };
  CompileOptions opts;
  opts.fullgraph = true;
  opts.dynamic = true;
  auto compiled = tessera::compile(fn, opts);
  for (int64_t n : {32, 48, 40, 64}) {
    Tensor x = rand(n);
    EXPECT_TRUE(all_close(compiled(x), x * 2.0)) << n;
  }
  // EVEN read n % 16: one graph for sizes divisible by 16, one for the others.
  EXPECT_EQ(compiled.stats().graphs, 2);
}

// ---- do_bench and perf_report
// ------------------------------------------------------------------------

TEST(DoBench, TimesAndQuantiles) {
  // Compute-bound work (cache flushes do not change its time), ten times more in `slow`.
  volatile double sink = 0;
  auto work = [&](int n) {
    double acc = 0;
    for (int i = 0; i < n; ++i) acc += std::sqrt(static_cast<double>(i) + sink);
    sink = acc;
  };
  // The smaller of three interleaved rounds of each: robust to a busy machine (CI runs two test
  // binaries at once on two cores), which once inflated one median past the other.
  double ms = 1e30, slow = 1e30;
  for (int round = 0; round < 3; ++round) {
    ms = std::min(ms, do_bench([&] { work(20000); }, 2, 10));
    slow = std::min(slow, do_bench([&] { work(200000); }, 2, 10));
  }
  EXPECT_GT(ms, 0);  // (how long it takes is bench_tune_cpu's to say, not a test's)
  const auto q = do_bench_quantiles([&] { work(20000); }, {0.2, 0.5, 0.8}, 1, 5);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_LE(q[0], q[1]);
  EXPECT_LE(q[1], q[2]);
  EXPECT_GT(slow, ms * 3);
  EXPECT_NE(error_of<ValueError>([&] { do_bench([] {}, 1, 0); }).find("rep"), std::string::npos);
  BenchOptions o;
  o.return_mode = "fastest";
  EXPECT_NE(error_of<ValueError>([&] { do_bench([] {}, o); }).find("return_mode"),
            std::string::npos);
}

// The GPU timing loop's stopping rules, on made-up runs: at least 20; a median known to 1% (its
// 95% interval from the order statistics n/2 -+ 0.98 sqrt(n)); a racer that cannot come within 5%
// of the best time stops even while its median is still uncertain.
TEST(DoBench, TheGpuLoopStopsOnAKnownMedianOrALostRace) {
  namespace td = tessera::testing::detail;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> steady(19, 1.0);
  EXPECT_EQ(td::bench_stop(steady, inf), td::BenchStopReason::More);  // too few
  steady.push_back(1.0);
  EXPECT_EQ(td::bench_stop(steady, inf), td::BenchStopReason::MedianKnown);
  // 100 runs spread evenly over [1, 2): the interval covers ranks 40..60, 0.2 wide: uncertain.
  std::vector<double> spread;
  for (int i = 99; i >= 0; --i) spread.push_back(1.0 + i / 100.0);  // (unsorted on purpose)
  EXPECT_EQ(td::bench_stop(spread, inf), td::BenchStopReason::More);
  EXPECT_EQ(td::bench_stop(spread, 1.5), td::BenchStopReason::More);       // could still win
  EXPECT_EQ(td::bench_stop(spread, 1.35), td::BenchStopReason::More);      // lo 1.40 <= 1.05 x 1.35
  EXPECT_EQ(td::bench_stop(spread, 1.3), td::BenchStopReason::CannotWin);  // 1.40 > 1.365
  // Ranks 40..60 of 100 within 1% of the median, the tails anywhere: known.
  std::vector<double> tails(100, 1.0);
  for (int i = 0; i < 30; ++i) tails[i] = 0.5, tails[99 - i] = 3.0;
  EXPECT_EQ(td::bench_stop(tails, inf), td::BenchStopReason::MedianKnown);
}

TEST(PerfReport, WritesTableCsvAndSvg) {
  Benchmark b;
  b.x_names = {"n"};
  b.x_vals = {1024, 4096, 16384};
  b.line_arg = "provider";
  b.line_vals = {"tessera", "eager"};
  b.line_names = {"tessera", "Eager"};
  b.styles = {{"blue", "-"}, {"green", "--"}};
  b.plot_name = "add-perf";
  b.args = {{"scale", 2}};
  const std::string dir = ::testing::TempDir() + "/perf_report";
  ::testing::internal::CaptureStdout();
  auto t = perf_report(
      b,
      [](const BenchArgs& a) {
        EXPECT_EQ(a["scale"], 2);
        const double base = a["n"] / 1000.0;
        return Measure(a.line == "tessera" ? base : 2 * base, base * 0.9, base * 1.1);
      },
      true, dir);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(printed.find("| n | tessera (ms) | Eager (ms) |"), std::string::npos) << printed;
  EXPECT_NE(printed.find("| 4096 | 4.096 | 8.192 |"), std::string::npos) << printed;
  std::ifstream svg(dir + "/add-perf.svg"), csv(dir + "/add-perf.csv");
  std::stringstream s1, s2;
  s1 << svg.rdbuf();
  s2 << csv.rdbuf();
  EXPECT_NE(s1.str().find("<polyline"), std::string::npos);
  EXPECT_NE(s1.str().find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(s1.str().find(">Eager<"), std::string::npos);
  EXPECT_NE(s2.str().find("16384,16.384,14.7456,18.0224,32.768"), std::string::npos) << s2.str();
  EXPECT_NE(error_of<ValueError>([&] {
              b.line_names = {"one"};
              perf_report(b, [](const BenchArgs&) { return Measure(1); });
            }).find("line_names"),
            std::string::npos);
  // The CSV reads back to the same table (the chart command's input).
  const PerfTable back = PerfTable::parse_csv(s2.str(), b);
  EXPECT_EQ(back.csv(), s2.str());
  EXPECT_EQ(back.bench.line_vals, (std::vector<std::string>{"tessera", "Eager"}));
  EXPECT_TRUE(back.bench.x_labels.empty());
}

// Categories (a benchmark table's workloads) draw grouped bars; a missing peer draws nothing.
TEST(PerfReport, CategoryChartsFromCsvAndTheChartCommand) {
  const std::string text =
      "workload,tessera,torch,Halide\n"
      "add f32 2^24,47.4,48.5,33.5\n"
      "softmax 4096x1024,28.8,27.5,\n"
      "layer norm <fused>,24.6,5.4,20.6\n";
  const PerfTable t = PerfTable::parse_csv(text);
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.bench.x_labels,
            (std::vector<std::string>{"add f32 2^24", "softmax 4096x1024", "layer norm <fused>"}));
  EXPECT_EQ(t.bench.line_vals, (std::vector<std::string>{"tessera", "torch", "Halide"}));
  EXPECT_DOUBLE_EQ(t.rows[2][1].y, 5.4);
  EXPECT_TRUE(std::isnan(t.rows[1][2].y));
  const std::string svg = t.svg();
  size_t rects = 0;
  for (size_t at = 0; (at = svg.find("<rect x=", at)) != std::string::npos; ++at) ++rects;
  // 8 bars (one value missing) + 3 legend swatches + the plot frame.
  EXPECT_EQ(rects, 8u + 3u + 1u) << svg;
  EXPECT_NE(svg.find(">layer norm &lt;fused&gt;<"), std::string::npos) << svg;
  EXPECT_NE(svg.find("text-anchor=\"end\">60<"), std::string::npos)
      << svg;  // round ticks: 0, 20, ..
  EXPECT_EQ(svg.find("nan"), std::string::npos) << svg;
  EXPECT_NE(t.markdown().find("| softmax 4096x1024 | 28.8 | 27.5 | nan |"), std::string::npos)
      << t.markdown();
  EXPECT_NE(error_of<ValueError>([] {
              PerfTable::parse_csv("n,a\n1,2\n2,x3\n");
            }).find("CSV line 3: 'x3' is not a number"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] { PerfTable::parse_csv("n,a\n1,2,3\n"); }).find("3 cells"),
            std::string::npos);
  // The CLI draws the same file.
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream f(dir + "/chart.csv");
    f << text;
  }
  const std::string cli = TESSERA_CLI;
  EXPECT_EQ(std::system((cli + " chart " + dir + "/chart.csv " + dir +
                         "/chart.svg --title 'CPU kernels' --ylabel GB/s")
                            .c_str()),
            0);
  std::ifstream drawn(dir + "/chart.svg");
  std::stringstream d;
  d << drawn.rdbuf();
  EXPECT_NE(d.str().find(">CPU kernels<"), std::string::npos) << d.str();
  EXPECT_NE(d.str().find(">GB/s<"), std::string::npos) << d.str();
  EXPECT_NE(std::system((cli + " chart " + dir + "/nonexistent.csv 2>/dev/null").c_str()), 0);
}

}  // namespace
