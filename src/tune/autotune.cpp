// Autotuning and heuristics: candidates per config, tuning rounds (one compile batch, then
// timing with hooks and restores), the in-memory choice and the tuning database.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <numeric>
#include <optional>
#include <sstream>

#include "core/progress.h"
#include "tessera/env.h"
#include "tessera/testing.h"
#include "tl/jit.h"
#include "tune/tune_db.h"
#include "tune/tuned.h"

namespace tessera::tl {

using detail::Candidate;
using detail::TunedState;
using PKind = JITFunction::ParamSpec::Kind;

// ---- values, configs, args
// -------------------------------------------------------------------------

namespace {
MetaValue from_meta(const MetaArg& m) {
  MetaValue v;
  v.kind = m.kind;
  v.i = m.i;
  v.f = m.f;
  v.dtype = m.dtype;
  return v;
}
}  // namespace

Config::Config(std::initializer_list<std::pair<std::string, MetaValue>> kw, int64_t nw, int64_t ns,
               std::optional<int64_t> mr)
    : Config(std::vector<std::pair<std::string, MetaValue>>(kw), nw, ns, mr) {}

Config::Config(std::vector<std::pair<std::string, MetaValue>> kw, int64_t nw, int64_t ns,
               std::optional<int64_t> mr)
    : kwargs(std::move(kw)), num_warps(nw), num_stages(ns), maxnreg(mr) {
  TS_CHECK(num_warps >= 1 && (num_warps & (num_warps - 1)) == 0, ValueError)
      << "tl::Config: num_warps must be a power of 2, got " << num_warps;
  TS_CHECK(num_stages >= 1, ValueError)
      << "tl::Config: num_stages must be >= 1, got " << num_stages;
  TS_CHECK(!maxnreg || (*maxnreg >= 1 && *maxnreg <= 255), ValueError)
      << "tl::Config: maxnreg is a per-thread register limit in 1..255, got " << *maxnreg;
  for (size_t a = 0; a < kwargs.size(); ++a) {
    for (size_t b = a + 1; b < kwargs.size(); ++b) {
      TS_CHECK(kwargs[a].first != kwargs[b].first, ValueError)
          << "tl::Config: meta-parameter '" << kwargs[a].first << "' is given twice";
    }
  }
}

std::string Config::str() const {
  std::string s;
  for (const auto& [n, v] : kwargs) s += n + ": " + v.str() + ", ";
  s += "num_warps: " + std::to_string(num_warps) + ", num_stages: " + std::to_string(num_stages);
  if (maxnreg) s += ", maxnreg: " + std::to_string(*maxnreg);
  return s;
}

const MetaValue* Config::find(std::string_view name) const {
  for (const auto& [n, v] : kwargs) {
    if (n == name) return &v;
  }
  return nullptr;
}

const Args::Entry& Args::get(std::string_view name) const {
  for (const auto& e : entries_) {
    if (e.name == name) return e;
  }
  std::string known;
  for (const auto& e : entries_) known += (known.empty() ? "" : ", ") + std::string(e.name);
  TS_ERROR(ValueError) << "[kernel " << kernel_ << "] no argument or meta-parameter named '" << name
                       << "' (have: " << known << ")";
}

bool Args::contains(std::string_view name) const {
  for (const auto& e : entries_) {
    if (e.name == name) return true;
  }
  return false;
}

const Tensor& Args::tensor(std::string_view name) const {
  const Entry& e = get(name);
  TS_CHECK(e.kind == Entry::Kind::Tensor, TypeError)
      << "[kernel " << kernel_ << "] argument '" << name << "' is not a tensor";
  return *e.tensor;
}

int64_t Args::operator[](std::string_view name) const {
  const Entry& e = get(name);
  if (e.kind == Entry::Kind::Int) return static_cast<int64_t>(e.sym);  // guards while compiling
  if (e.kind == Entry::Kind::Meta &&
      (e.meta.kind == MetaArg::Kind::Int || e.meta.kind == MetaArg::Kind::Bool))
    return e.meta.i;
  TS_ERROR(TypeError) << "[kernel " << kernel_ << "] argument '" << name << "' is not an integer";
}

SymInt Args::sym(std::string_view name) const {
  const Entry& e = get(name);
  if (e.kind == Entry::Kind::Int) return e.sym;
  return SymInt((*this)[name]);
}

double Args::float_value(std::string_view name) const {
  const Entry& e = get(name);
  if (e.kind == Entry::Kind::Float) return e.f;
  if (e.kind == Entry::Kind::Meta && e.meta.kind == MetaArg::Kind::Float) return e.meta.f;
  return static_cast<double>((*this)[name]);
}

MetaValue Args::value(std::string_view name) const {
  const Entry& e = get(name);
  switch (e.kind) {
    case Entry::Kind::Meta:
      return e.meta;
    case Entry::Kind::Int:
      return MetaValue(static_cast<int64_t>(e.sym));
    case Entry::Kind::Float:
      return MetaValue(e.f);
    case Entry::Kind::Tensor:
      break;
  }
  TS_ERROR(TypeError) << "[kernel " << kernel_ << "] argument '" << name
                      << "' is a tensor, not a value";
}

// ---- the tuned state
// ---------------------------------------------------------------------------------

namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void tune_error(const std::string& kernel, SourceLoc loc, const std::string& msg) {
  std::ostringstream os;
  os << "[kernel " << kernel << "] ";
  if (loc.known()) os << loc << ": ";
  os << msg;
  throw CompileError(os.str(), loc);
}

// `named` with a candidate's meta-parameters appended (the view heuristics and hooks see).
Args with_meta(const Args& named, const std::vector<std::pair<std::string, MetaValue>>& meta) {
  Args a = named;
  for (const auto& [n, v] : meta) {
    Args::Entry e;
    e.name = n;
    e.kind = Args::Entry::Kind::Meta;
    e.meta = v;
    a.entries_.push_back(e);
  }
  return a;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

std::string TunedState::name() const {
  return kernel->name();
}

Args TunedState::named(ArrayRef<KernelArg> args) const {
  const auto& s = kernel->state();
  Args a;
  a.kernel_ = s.name;
  const size_t n = s.params.size();
  SmallVector<bool, 16> set(n, false);
  size_t positional = 0;
  for (const auto& k : args) {
    if (k.kind == KernelArg::Kind::Option) continue;
    if (k.kind == KernelArg::Kind::Meta) {
      Args::Entry e;
      e.name = k.meta.name;
      e.kind = Args::Entry::Kind::Meta;
      e.meta = from_meta(k.meta);
      for (size_t i = 0; i < n; ++i) {
        if (s.params[i].name == k.meta.name) set[i] = true;
      }
      a.entries_.push_back(e);
      continue;
    }
    while (positional < n && set[positional]) ++positional;
    if (positional >= n) break;  // too many arguments: the kernel's binding reports it
    Args::Entry e;
    e.name = s.params[positional].name;
    switch (k.kind) {
      case KernelArg::Kind::Tensor:
        e.kind = Args::Entry::Kind::Tensor;
        e.tensor = k.tensor;
        break;
      case KernelArg::Kind::Int:
        e.sym = k.sym;
        break;
      case KernelArg::Kind::Float:
        e.kind = Args::Entry::Kind::Float;
        e.f = k.f;
        break;
      case KernelArg::Kind::Bool:
        e.kind = Args::Entry::Kind::Meta;
        e.meta = MetaValue(k.i != 0);
        break;
      case KernelArg::Kind::DType:
        e.kind = Args::Entry::Kind::Meta;
        e.meta = MetaValue(k.dtype);
        break;
      default:
        break;
    }
    set[positional] = true;
    a.entries_.push_back(e);
  }
  return a;
}

std::vector<Candidate> TunedState::candidates(const Args& named, SourceLoc loc) const {
  std::vector<Candidate> out(1);
  auto check_free = [&](const Candidate& c, const std::string& n, const std::string& by) {
    if (named.contains(n)) {
      tune_error(name(), loc,
                 "meta-parameter '" + n + "' is set by the launch and by " + by +
                     "; do not pass tuned or heuristic meta-parameters at the launch");
    }
    for (const auto& [m, v] : c.meta) {
      if (m == n)
        tune_error(name(), loc,
                   "meta-parameter '" + n + "' is set twice (the second time by " + by + ")");
    }
  };
  for (size_t li = layers.size(); li-- > 0;) {  // outermost first
    const Layer& L = layers[li];
    if (!L.autotune) {
      for (Candidate& c : out) {
        for (const auto& [n, fn] : L.heuristics) {
          check_free(c, n, "a heuristic");
          MetaValue v;
          {
            const Args view = with_meta(named, c.meta);
            v = fn(view);
          }
          c.meta.emplace_back(n, v);
        }
      }
      continue;
    }
    std::vector<Candidate> next;
    next.reserve(out.size() * L.configs.size());
    for (const Candidate& c : out) {
      for (size_t k = 0; k < L.configs.size(); ++k) {
        const Config& cfg = L.configs[k];
        Candidate d = c;
        for (const auto& kw : cfg.kwargs) {
          check_free(d, kw.first, "config '" + cfg.str() + "'");
          d.meta.push_back(kw);
        }
        d.has_options = true;
        d.num_warps = cfg.num_warps;
        d.num_stages = cfg.num_stages;
        d.maxnreg = cfg.maxnreg.value_or(0);
        d.config = static_cast<int>(k);
        next.push_back(std::move(d));
      }
    }
    out = std::move(next);
  }
  return out;
}

const Config* TunedState::config_of(const Candidate& c) const {
  if (tune_layer < 0 || c.config < 0) return nullptr;
  return &layers[static_cast<size_t>(tune_layer)].configs[static_cast<size_t>(c.config)];
}

std::string TunedState::launch_hook(const Variant& v) const {
  const Config* cfg = config_of(v);
  return cfg && cfg->pre_hook ? cfg->str() : "";
}

void TunedState::before_launch(const Args& named, const Candidate& c) const {
  const Config* cfg = config_of(c);
  if (cfg && cfg->pre_hook) cfg->pre_hook(with_meta(named, c.meta));
}

size_t TunedState::choose(ArrayRef<KernelArg> args, const Args& named,
                          const std::vector<Candidate>& cands,
                          FunctionRef<void(size_t)> launch_candidate, SourceLoc loc) const {
  if (cands.size() == 1) {
    std::lock_guard<std::mutex> g(mutex);
    last_config = cands[0].config;
    return 0;
  }
  thread_local std::vector<int64_t> words;
  key_words(named, words);
  int config = -1;
  {
    std::lock_guard<std::mutex> g(mutex);
    auto it = choices.find(words);
    if (it != choices.end()) config = it->second;
  }
  if (config < 0) {
    const std::vector<int64_t> key_copy = words;  // (tuning may launch other tuned kernels)
    config = tune(args, named, cands, launch_candidate, key_text(named), loc);
    std::lock_guard<std::mutex> g(mutex);
    choices[key_copy] = config;
  }
  for (size_t i = 0; i < cands.size(); ++i) {
    if (cands[i].config == config) {
      std::lock_guard<std::mutex> g(mutex);
      last_config = config;
      return i;
    }
  }
  TS_INTERNAL_ASSERT(false) << "the chosen config is not a candidate";
}

size_t TunedState::WordsHash::operator()(const std::vector<int64_t>& v) const {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int64_t w : v) h = (h ^ static_cast<uint64_t>(w)) * 0x100000001b3ull + (h >> 29);
  return static_cast<size_t>(h);
}

namespace {

const Args::Entry* entry_of(const Args& a, std::string_view name) {
  for (const auto& e : a.entries()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

// Specialization of an argument: 16-byte alignment of a tensor's data; an integer equal to 1 or
// divisible by 16 (unless the kernel opts out for that parameter).
int spec_code(const KernelState& s, const Args::Entry& e) {
  if (e.kind == Args::Entry::Kind::Tensor) {
    return !e.tensor->has_data() || reinterpret_cast<uintptr_t>(e.tensor->impl()->data()) % 16 == 0
               ? 'a'
               : '-';
  }
  if (e.kind != Args::Entry::Kind::Int) return 0;
  size_t p = 0;
  while (p < s.params.size() && s.params[p].name != e.name) ++p;
  if (p < s.params.size() && s.no_specialize[p]) return 0;
  const int64_t v = e.sym.expect_int();
  return v == 1 ? '1' : v % 16 == 0 ? 'd' : '-';
}

}  // namespace

void TunedState::key_words(const Args& named, std::vector<int64_t>& out) const {
  out.clear();
  const Layer& L = layers[static_cast<size_t>(tune_layer)];
  for (const auto& k : L.key) {
    const Args::Entry* e = entry_of(named, k);
    if (!e) {
      out.push_back(-1);  // a meta-parameter the configs set
      continue;
    }
    switch (e->kind) {
      case Args::Entry::Kind::Tensor:
        out.push_back(e->tensor->dim());
        for (int64_t d = 0; d < e->tensor->dim(); ++d)
          out.push_back(e->tensor->size(d).expect_int());
        break;
      case Args::Entry::Kind::Int:
        out.push_back(e->sym.expect_int());
        break;
      case Args::Entry::Kind::Float: {
        int64_t bits;
        std::memcpy(&bits, &e->f, 8);
        out.push_back(bits);
        break;
      }
      case Args::Entry::Kind::Meta: {
        int64_t bits;
        std::memcpy(&bits, &e->meta.f, 8);
        out.push_back(static_cast<int64_t>(e->meta.kind));
        out.push_back(e->meta.i);
        out.push_back(bits);
        out.push_back(static_cast<int64_t>(e->meta.dtype));
        break;
      }
    }
  }
  const auto& s = kernel->state();
  for (const auto& e : named.entries()) {
    if (e.kind == Args::Entry::Kind::Tensor) out.push_back(static_cast<int64_t>(e.tensor->dtype()));
    out.push_back(spec_code(s, e));
  }
}

std::string TunedState::key_text(const Args& named) const {
  const Layer& L = layers[static_cast<size_t>(tune_layer)];
  std::string key;
  for (const auto& k : L.key) {
    const Args::Entry* e = entry_of(named, k);
    if (!e) continue;  // a meta-parameter the configs set
    key += k + "=";
    switch (e->kind) {
      case Args::Entry::Kind::Tensor: {
        key += "[";
        for (int64_t d = 0; d < e->tensor->dim(); ++d)
          key += (d ? "," : "") + std::to_string(e->tensor->size(d).expect_int());
        key += "]";
        break;
      }
      case Args::Entry::Kind::Int:
        key += std::to_string(e->sym.expect_int());
        break;
      case Args::Entry::Kind::Float: {
        std::ostringstream os;
        os << e->f;
        key += os.str();
        break;
      }
      case Args::Entry::Kind::Meta:
        key += e->meta.str();
        break;
    }
    key += " ";
  }
  std::string dtypes, spec;
  const auto& s = kernel->state();
  for (const auto& e : named.entries()) {
    if (e.kind == Args::Entry::Kind::Tensor)
      dtypes += std::string(dtypes.empty() ? "" : ",") + dtype_name(e.tensor->dtype());
    if (const int c = spec_code(s, e)) spec += static_cast<char>(c);
  }
  return key + "dtypes=" + dtypes + " spec=" + spec;
}

namespace {

/** One tuning round: prune, prepare, consult the database, build in one batch, time with hooks
 * and restores, pick the winner, report. Each phase is a method; `run` calls them in order. */
class TuneRound {
 public:
  TuneRound(const TunedState& st, ArrayRef<KernelArg> args, const Args& named,
            const std::vector<Candidate>& cands, FunctionRef<void(size_t)> launch_candidate,
            const std::string& key, SourceLoc loc)
      : st_(st),
        L_(st.layers[static_cast<size_t>(st.tune_layer)]),
        o_(L_.options),
        s_(st.kernel->state()),
        args_(args),
        named_(named),
        cands_(cands),
        launch_candidate_(launch_candidate),
        key_(key),
        loc_(loc),
        reason_(cands.size()) {}

  int run() {
    prune();
    prepare();
    consult_database();
    if (to_time_.empty()) {
      take_recorded();
    } else {
      build();
      save_tensors();
      time_all();
      pick_best();
    }
    remember();
    if (print_) print();
    return winner_;
  }

 private:
  const Config& cfg_of(size_t i) const { return L_.configs[static_cast<size_t>(cands_[i].config)]; }

  [[noreturn]] void all_failed() const {
    std::string all;
    for (size_t i : pool_)
      all += "\n  " + cfg_of(i).str() + ": " + (reason_[i].empty() ? "not timed" : reason_[i]);
    tune_error(st_.name(), loc_, "every autotuning config failed:" + all);
  }

  // Pruning: early_config_prune, then perf_model / top_k.
  void prune() {
    pool_.resize(cands_.size());
    std::iota(pool_.begin(), pool_.end(), size_t{0});
    const auto& by = o_.prune_configs_by;
    if (by.early_config_prune) {
      std::vector<Config> in;
      for (size_t i : pool_) in.push_back(cfg_of(i));
      const auto kept = by.early_config_prune(in, named_);
      std::vector<size_t> next;
      for (size_t i : pool_) {
        const std::string cs = cfg_of(i).str();
        if (std::any_of(kept.begin(), kept.end(), [&](const Config& c) { return c.str() == cs; }))
          next.push_back(i);
      }
      if (next.empty())
        tune_error(
            st_.name(), loc_,
            "early_config_prune kept none of the " + std::to_string(pool_.size()) + " configs");
      pool_ = std::move(next);
    }
    if (by.perf_model && by.top_k > 0) {
      const double tk = by.top_k;
      const size_t k =
          tk >= 1 ? static_cast<size_t>(tk)
                  : std::max<size_t>(
                        1, static_cast<size_t>(std::ceil(tk * static_cast<double>(pool_.size()))));
      if (k < pool_.size()) {
        std::vector<std::pair<double, size_t>> est;
        for (size_t i : pool_)
          est.emplace_back(by.perf_model(cfg_of(i), with_meta(named_, cands_[i].meta)), i);
        std::stable_sort(est.begin(), est.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        pool_.clear();
        for (size_t j = 0; j < k; ++j) pool_.push_back(est[j].second);
      }
    }
  }

  // Bind and prepare every candidate; a config that fails is skipped with its reason.
  void prepare() {
    std::vector<std::vector<KernelArg>> pool_args;
    SmallVector<KernelArg, 16> a;
    for (size_t i : pool_) {
      with_variant(args_, cands_[i], loc_, a);
      pool_args.emplace_back(a.begin(), a.end());
    }
    prepared_.emplace(*st_.kernel, std::move(pool_args), loc_, /*tolerate_failures=*/true);
    for (size_t p = 0; p < pool_.size(); ++p) {
      if (!prepared_->kernel(p)) {
        reason_[pool_[p]] = prepared_->error(p);
        continue;
      }
      ok_.push_back(pool_[p]);
      at_.push_back(p);
      kernels_.push_back(prepared_->kernel(p));
    }
    ms_.assign(ok_.size(), std::numeric_limits<double>::infinity());
    note_.assign(ok_.size(), "");
  }

  // Which candidates have a timing for this key already: time the others, and the best
  // recorded one beside them.
  void consult_database() {
    found_.resize(ok_.size());
    ident_.resize(ok_.size());
    for (size_t j = 0; j < ok_.size(); ++j) {
      // Records are filed under the backend's target (device, ISA, toolchain) and the code.
      ident_[j] = tune::Record{s_.name, cfg_of(ok_[j]).str(), key_,
                               kernels_[j]->backend->target_key(), kernels_[j]->code.code_key};
      if (o_.cache_results) found_[j] = tune::find(ident_[j]);
    }
    for (size_t j = 0; j < ok_.size(); ++j) {
      if (found_[j] && (!incumbent_ || found_[j]->ms < found_[*incumbent_]->ms)) incumbent_ = j;
    }
    for (size_t j = 0; j < ok_.size(); ++j) {
      if (kernels_[j] && !found_[j]) to_time_.push_back(j);
    }
    if (!to_time_.empty() && incumbent_) to_time_.push_back(*incumbent_);
  }

  void take_recorded() {
    if (!incumbent_) all_failed();
    winner_ = cands_[ok_[*incumbent_]].config;
    for (size_t j = 0; j < ok_.size(); ++j) {
      if (found_[j]) {
        ms_[j] = found_[j]->ms;
        note_[j] = "database";
      }
    }
  }

  // One compile batch for everything to be timed.
  void build() {
    std::vector<size_t> which;
    for (size_t j : to_time_) {
      which.push_back(at_[j]);
      if (!kernels_[j]->code.built) ++compiled_;
    }
    const auto t0 = Clock::now();
    prepared_->build(which);
    compile_ms_ = ms_since(t0);
    for (size_t j : to_time_) kernels_[j] = prepared_->kernel(at_[j]);
  }

  // Tensors to save and restore: restore_value, and (restore_written) every tensor one of the
  // kernels both reads and writes; reset_to_zero's tensors.
  void save_tensors() {
    for (const auto& e : named_.entries()) {
      if (e.kind != Args::Entry::Kind::Tensor || !e.tensor->has_data()) continue;
      const std::string n(e.name);
      const bool zero =
          std::find(o_.reset_to_zero.begin(), o_.reset_to_zero.end(), n) != o_.reset_to_zero.end();
      bool keep =
          std::find(o_.restore_value.begin(), o_.restore_value.end(), n) != o_.restore_value.end();
      if (!keep && o_.restore_written && !zero) {
        size_t p = 0;
        while (p < s_.params.size() && s_.params[p].name != n) ++p;
        for (size_t j : to_time_) {
          if (p < kernels_[j]->read.size() && kernels_[j]->read[p] && kernels_[j]->written[p])
            keep = true;
        }
      }
      if (zero) zeroed_.push_back(*e.tensor);
      if (keep) saved_.emplace_back(*e.tensor, e.tensor->clone());
    }
  }

  void restore() {
    for (auto& [t, copy] : saved_) t.copy_(copy);
  }

  void put_record(size_t j) const {
    if (!o_.cache_results) return;
    tune::Record r = ident_[j];
    r.ms = ms_[j];
    r.unix_time = static_cast<int64_t>(std::time(nullptr));
    tune::put(r);
  }

  // The device the kernels run on: a CUDA device's index, or -1 (the CPU).
  int cuda_device() const {
    for (const auto& e : named_.entries()) {
      if (e.kind == Args::Entry::Kind::Tensor && e.tensor->has_data() &&
          e.tensor->device().is_cuda())
        return std::max(e.tensor->device().index(), 0);
    }
    return -1;
  }

  // Times candidate j (its setup, hooks and teardown around every run); records the time. On a
  // GPU, CUDA events time each run, and a candidate that cannot come within 5% of `beat` (the
  // best time so far) stops early.
  void time_one(size_t j, double beat) {
    const Candidate& c = cands_[ok_[j]];
    const Config& cfg = cfg_of(ok_[j]);
    const Args view = with_meta(named_, c.meta);
    auto setup = [&] {
      restore();
      for (Tensor t : zeroed_) t.zero_();
      if (o_.pre_hook) o_.pre_hook(view);
      if (cfg.pre_hook) cfg.pre_hook(view);
    };
    auto call = [&] { launch_candidate_(ok_[j]); };
    auto teardown = [&] {
      if (o_.post_hook) o_.post_hook(view, nullptr);
    };
    try {
      if (o_.do_bench) {
        ms_[j] = o_.do_bench([&] {
          setup();
          try {
            call();
          } catch (...) {
            if (o_.post_hook) o_.post_hook(view, std::current_exception());
            throw;
          }
          teardown();
        });
      } else {
        try {
          const int device = cuda_device();
          const auto runs =
              device >= 0
                  ? testing::detail::gpu_bench_runs(call, setup, teardown, o_.warmup, o_.rep, true,
                                                    device, beat)
                  : testing::detail::bench_runs(call, setup, teardown, o_.warmup, o_.rep, true);
          ms_[j] = testing::detail::quantile(runs, 0.5);
        } catch (...) {
          if (o_.post_hook) o_.post_hook(view, std::current_exception());
          throw;
        }
      }
      ++timed_;
      put_record(j);
    } catch (const std::exception& e) {
      reason_[ok_[j]] = e.what();
      ms_[j] = std::numeric_limits<double>::infinity();
    }
  }

  // Candidates that generate the same code are timed once and share the time (and a record).
  void time_all() {
    std::vector<size_t> same_as(ok_.size());
    for (size_t a = 0; a < to_time_.size(); ++a) {
      same_as[to_time_[a]] = to_time_[a];
      for (size_t b = 0; b < a; ++b) {
        if (kernels_[to_time_[b]]->code.code_key == kernels_[to_time_[a]]->code.code_key) {
          same_as[to_time_[a]] = same_as[to_time_[b]];
          break;
        }
      }
    }
    // A long round shows a progress line (TESSERA_PROGRESS): timed so far, the best, time left.
    ProgressLine progress("autotune " + s_.name);
    const auto t_timing = Clock::now();
    size_t distinct = 0;
    for (size_t j : to_time_) distinct += same_as[j] == j;
    std::optional<size_t> best;
    for (size_t j : to_time_) {
      if (same_as[j] != j) continue;
      time_one(j, best ? ms_[*best] : std::numeric_limits<double>::infinity());
      if (std::isfinite(ms_[j]) && (!best || ms_[j] < ms_[*best])) best = j;
      if (!progress.enabled()) continue;
      const double per = ms_since(t_timing) / static_cast<double>(timed_ ? timed_ : 1);
      std::string text = "compiled " + std::to_string(compiled_) + ", timed " +
                         std::to_string(timed_) + "/" + std::to_string(distinct);
      if (best) {
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.4g ms", ms_[*best]);
        text += ", best " + cfg_of(ok_[*best]).str() + " " + ms;
      }
      if (timed_ < distinct) {
        char left[48];
        std::snprintf(left, sizeof left, ", ~%.1f s left",
                      per * static_cast<double>(distinct - timed_) / 1000.0);
        text += left;
      }
      progress.update(text, timed_ == distinct);
    }
    for (size_t j : to_time_) {
      if (same_as[j] == j) continue;
      ms_[j] = ms_[same_as[j]];
      note_[j] = "same code as " + cfg_of(ok_[same_as[j]]).str();
      reason_[ok_[j]] = reason_[ok_[same_as[j]]];
      if (std::isfinite(ms_[j])) put_record(j);
    }
    restore();
    for (Tensor t : zeroed_) t.zero_();  // Triton zeroes them again before the real launch
  }

  void pick_best() {
    std::optional<size_t> best;
    for (size_t j : to_time_) {
      if (std::isfinite(ms_[j]) && (!best || ms_[j] < ms_[*best])) best = j;
    }
    if (!best) all_failed();
    winner_ = cands_[ok_[*best]].config;
    if (incumbent_ && *best == *incumbent_) note_[*incumbent_] = "incumbent, re-timed";
  }

  void remember() const {
    std::lock_guard<std::mutex> g(st_.mutex);
    st_.last_timings.clear();
    for (size_t j = 0; j < ok_.size(); ++j) {
      if (std::isfinite(ms_[j])) st_.last_timings.emplace_back(cands_[ok_[j]].config, ms_[j]);
    }
    ++st_.rounds;
    st_.last_timed = static_cast<int>(timed_);
  }

  // TESSERA_PRINT_AUTOTUNING: the key, each config's time or why it has none, the winner.
  void print() const {
    std::ostringstream os;
    os << "[tessera autotune] " << s_.name << " key: " << key_ << "\n";
    for (size_t i = 0; i < cands_.size(); ++i) {
      os << "  " << cfg_of(i).str() << ": ";
      const auto j = std::find(ok_.begin(), ok_.end(), i);
      const size_t jj = static_cast<size_t>(j - ok_.begin());
      if (std::find(pool_.begin(), pool_.end(), i) == pool_.end()) {
        os << "pruned";
      } else if (j == ok_.end() || !std::isfinite(ms_[jj])) {
        os << (j != ok_.end() && found_[jj]
                   ? "recorded, not re-timed"
                   : "skipped (" + (reason_[i].empty() ? std::string("not timed") : reason_[i]) +
                         ")");
      } else {
        os << ms_[jj] << " ms";
        if (!note_[jj].empty()) os << " (" << note_[jj] << ")";
      }
      os << "\n";
    }
    os << "  best: " << L_.configs[static_cast<size_t>(winner_)].str() << "; " << compiled_
       << " compiled in " << static_cast<int64_t>(compile_ms_) << " ms, " << timed_
       << " timed, round " << static_cast<int64_t>(ms_since(t_round_)) << " ms\n";
    std::cerr << os.str() << std::flush;
  }

  const TunedState& st_;
  const TunedState::Layer& L_;
  const AutotuneOptions& o_;
  const detail::KernelState& s_;
  ArrayRef<KernelArg> args_;
  const Args& named_;
  const std::vector<Candidate>& cands_;
  FunctionRef<void(size_t)> launch_candidate_;
  const std::string& key_;
  SourceLoc loc_;
  const Clock::time_point t_round_ = Clock::now();
  const bool print_ = knobs().print_autotuning;

  std::vector<std::string> reason_;  ///< per candidate: why it has no time
  std::vector<size_t> pool_;         ///< candidates left after pruning
  std::optional<PreparedVariants> prepared_;
  std::vector<size_t> ok_;  ///< candidates that prepared (index j below is into these)
  std::vector<size_t> at_;  ///< their positions in `prepared_`
  std::vector<std::shared_ptr<CompiledKernel>> kernels_;
  std::vector<std::optional<tune::Record>> found_;
  std::vector<tune::Record> ident_;
  std::optional<size_t> incumbent_;
  std::vector<size_t> to_time_;
  std::vector<double> ms_;
  std::vector<std::string> note_;
  std::vector<Tensor> zeroed_;
  std::vector<std::pair<Tensor, Tensor>> saved_;
  int winner_ = -1;
  size_t compiled_ = 0, timed_ = 0;
  double compile_ms_ = 0;
};

}  // namespace

int TunedState::tune(ArrayRef<KernelArg> args, const Args& named,
                     const std::vector<Candidate>& cands,
                     FunctionRef<void(size_t)> launch_candidate, const std::string& key,
                     SourceLoc loc) const {
  return TuneRound(*this, args, named, cands, launch_candidate, key, loc).run();
}

std::shared_ptr<const std::vector<Variant>> TunedState::variants(ArrayRef<KernelArg> args,
                                                                 SourceLoc loc) const {
  // Without heuristics the candidates depend only on the configs: made once (a launch that sets
  // a tuned meta-parameter itself still gets the conflict error from candidates()).
  const bool launch_sets_meta = std::any_of(
      args.begin(), args.end(), [](const KernelArg& a) { return a.kind == KernelArg::Kind::Meta; });
  if (has_heuristics || launch_sets_meta)
    return std::make_shared<const std::vector<Candidate>>(candidates(named(args), loc));
  std::shared_ptr<const std::vector<Candidate>> fixed;
  {
    std::lock_guard<std::mutex> g(mutex);
    fixed = fixed_cands;
  }
  if (!fixed) {
    fixed = std::make_shared<const std::vector<Candidate>>(candidates(named(args), loc));
    std::lock_guard<std::mutex> g(mutex);
    fixed_cands = fixed;
  }
  return fixed;
}

void TunedState::run(ArrayRef<KernelArg> args, const std::vector<Variant>& cands,
                     FunctionRef<void(size_t)> run_variant, SourceLoc loc) const {
  const Args nm = named(args);
  const size_t pick = choose(args, nm, cands, run_variant, loc);
  before_launch(nm, cands[pick]);
  run_variant(pick);
}

void TunedState::launch(const Launcher& launcher, ArrayRef<KernelArg> args) const {
  const SourceLoc loc = launcher.location();
  const auto shared = variants(args, loc);
  const std::vector<Variant>& cands = *shared;
  SmallVector<KernelArg, 16> a;
  run(
      args, cands,
      [&](size_t i) {
        with_variant(args, cands[i], loc, a);
        launcher.run_kernel(ArrayRef<KernelArg>(a.data(), a.size()));
      },
      loc);
}

}  // namespace detail

// ---- the public face
// ------------------------------------------------------------------------------

Launcher TunedKernel::operator[](const LaunchGrid& grid) const {
  return Launcher(*s_, *s_->kernel, grid);
}
const JITFunction& TunedKernel::kernel() const {
  return *s_->kernel;
}
const std::vector<Config>& TunedKernel::configs() const {
  static const std::vector<Config> none;
  return s_->tune_layer < 0 ? none : s_->layers[static_cast<size_t>(s_->tune_layer)].configs;
}
std::optional<Config> TunedKernel::best_config() const {
  std::lock_guard<std::mutex> g(s_->mutex);
  if (s_->last_config < 0) return std::nullopt;
  return configs()[static_cast<size_t>(s_->last_config)];
}
std::vector<std::pair<Config, double>> TunedKernel::last_timings() const {
  std::lock_guard<std::mutex> g(s_->mutex);
  std::vector<std::pair<Config, double>> out;
  for (const auto& [c, ms] : s_->last_timings)
    out.emplace_back(configs()[static_cast<size_t>(c)], ms);
  return out;
}
int TunedKernel::tuning_rounds() const {
  std::lock_guard<std::mutex> g(s_->mutex);
  return s_->rounds;
}
int TunedKernel::last_round_timed() const {
  std::lock_guard<std::mutex> g(s_->mutex);
  return s_->last_timed;
}
void TunedKernel::clear_memory_cache() const {
  std::lock_guard<std::mutex> g(s_->mutex);
  s_->choices.clear();
}

namespace {

const JITFunction::ParamSpec* param(const JITFunction& k, std::string_view n) {
  for (const auto& p : k.params()) {
    if (p.name == n) return &p;
  }
  return nullptr;
}

std::string param_names(const JITFunction& k) {
  std::string r;
  for (const auto& p : k.params()) r += (r.empty() ? "" : ", ") + p.name;
  return r;
}

void check_names(const JITFunction& k, const std::vector<std::string>& names, const char* what,
                 bool tensors, SourceLoc loc) {
  for (const auto& n : names) {
    const auto* p = param(k, n);
    if (!p) {
      throw ValueError("[kernel " + k.name() + "] " + what + " names '" + n +
                           "', which is not a parameter (" + param_names(k) + ")",
                       loc);
    }
    if (tensors && p->kind != PKind::Pointer) {
      throw ValueError("[kernel " + k.name() + "] " + what + " names '" + n +
                           "', which is not a pointer parameter",
                       loc);
    }
  }
}

std::shared_ptr<TunedState> copy_of(const TunedState& in) {
  auto s = std::make_shared<TunedState>();
  s->kernel = in.kernel;
  s->layers = in.layers;
  s->tune_layer = in.tune_layer;
  s->has_heuristics = in.has_heuristics;
  return s;
}

TunedKernel add_autotune(std::shared_ptr<TunedState> s, std::vector<Config> configs,
                         std::vector<std::string> key, AutotuneOptions options, SourceLoc loc) {
  const JITFunction& k = *s->kernel;
  if (s->tune_layer >= 0) {
    throw CompileError("[kernel " + k.name() +
                           "] is autotuned twice; stacking tl::autotune is not supported (put all "
                           "configs in one list)",
                       loc);
  }
  if (configs.empty())
    throw ValueError("[kernel " + k.name() + "] tl::autotune needs at least one config", loc);
  check_names(k, key, "the autotuning key", false, loc);
  check_names(k, options.reset_to_zero, "reset_to_zero", true, loc);
  check_names(k, options.restore_value, "restore_value", true, loc);
  for (const auto& c : configs) {
    if (c.maxnreg) {
      // The CUDA backend will pass it to the compiler; say so instead of pretending it acts.
      warn_once("[kernel " + k.name() + "] config '" + c.str() +
                "': maxnreg limits registers on CUDA GPUs only; on the CPU backend it is kept "
                "with the config, its tuning record and the kernel's IR, and changes nothing");
    }
    for (const auto& [n, v] : c.kwargs) {
      if (!param(k, n)) {
        throw ValueError("[kernel " + k.name() + "] config '" + c.str() + "' sets '" + n +
                             "', which is not a parameter (" + param_names(k) + ")",
                         loc);
      }
    }
  }
  for (size_t a = 0; a < configs.size(); ++a) {
    for (size_t b = a + 1; b < configs.size(); ++b) {
      if (configs[a] == configs[b]) {
        throw ValueError(
            "[kernel " + k.name() + "] config '" + configs[a].str() + "' is listed twice", loc);
      }
    }
  }
  TunedState::Layer L;
  L.autotune = true;
  L.configs = std::move(configs);
  L.key = std::move(key);
  L.options = std::move(options);
  L.loc = loc;
  s->layers.push_back(std::move(L));
  s->tune_layer = static_cast<int>(s->layers.size()) - 1;
  return TunedKernel(std::move(s));
}

TunedKernel add_heuristics(std::shared_ptr<TunedState> s,
                           std::vector<std::pair<std::string, Heuristic>> values, SourceLoc loc) {
  const JITFunction& k = *s->kernel;
  for (const auto& [n, fn] : values) {
    if (!param(k, n)) {
      throw ValueError("[kernel " + k.name() + "] heuristic '" + n + "' is not a parameter (" +
                           param_names(k) + ")",
                       loc);
    }
    if (!fn)
      throw ValueError("[kernel " + k.name() + "] heuristic '" + n + "' has no function", loc);
  }
  TunedState::Layer L;
  L.heuristics = std::move(values);
  L.loc = loc;
  s->layers.push_back(std::move(L));
  s->has_heuristics = true;
  return TunedKernel(std::move(s));
}

}  // namespace

TunedKernel autotune(const JITFunction& kernel, std::vector<Config> configs,
                     std::vector<std::string> key, AutotuneOptions options, SourceLoc loc) {
  auto s = std::make_shared<TunedState>();
  s->kernel = &kernel;
  return add_autotune(std::move(s), std::move(configs), std::move(key), std::move(options), loc);
}

TunedKernel autotune(const TunedKernel& inner, std::vector<Config> configs,
                     std::vector<std::string> key, AutotuneOptions options, SourceLoc loc) {
  return add_autotune(copy_of(*inner.state()), std::move(configs), std::move(key),
                      std::move(options), loc);
}

TunedKernel heuristics(const JITFunction& kernel,
                       std::vector<std::pair<std::string, Heuristic>> values, SourceLoc loc) {
  auto s = std::make_shared<TunedState>();
  s->kernel = &kernel;
  return add_heuristics(std::move(s), std::move(values), loc);
}

TunedKernel heuristics(const TunedKernel& inner,
                       std::vector<std::pair<std::string, Heuristic>> values, SourceLoc loc) {
  return add_heuristics(copy_of(*inner.state()), std::move(values), loc);
}

}  // namespace tessera::tl
