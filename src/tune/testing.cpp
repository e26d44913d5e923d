// do_bench and perf_report (triton.testing's, on the CPU).
#include "tessera/testing.h"

#include <unistd.h>

#include <sys/stat.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <vector>

#include "runtime/cuda/context.h"
#include "runtime/cuda/memory.h"
#include "tessera/error.h"

namespace tessera::testing {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The last-level cache this CPU sees. sysfs first: sysconf can report a whole socket's L3 (320 MB
// on a 2-core EPYC VM whose cores share a 32 MB L3), which would make each flush cost 50 ms.
size_t last_level_cache_bytes() {
  long v = 0;
  for (const char* idx : {"index3", "index2"}) {
    std::ifstream f(std::string("/sys/devices/system/cpu/cpu0/cache/") + idx + "/size");
    std::string s;
    if (f >> s && !s.empty()) {
      v = std::atol(s.c_str());
      if (s.back() == 'K') v *= 1024;
      if (s.back() == 'M') v *= 1024 * 1024;
      break;
    }
  }
  if (v <= 0) v = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (v <= 0) v = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  return static_cast<size_t>(std::clamp<long>(v, 8L << 20, 256L << 20));
}

// Overwrites a buffer the size of the last-level cache (Triton zeroes 256 MB on the GPU).
void flush_cache() {
  static const size_t bytes = last_level_cache_bytes();
  static std::unique_ptr<uint64_t[]> buf(new uint64_t[bytes / 8]);
  static uint64_t tick = 0;
  ++tick;
  uint64_t* p = buf.get();
  for (size_t i = 0; i < bytes / 8; i += 8) p[i] = tick;  // one store per 64-byte line
}

}  // namespace

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

double summarize(std::vector<double> runs, const std::string& mode) {
  TS_CHECK(!runs.empty(), InternalError) << "do_bench: no timed runs";
  if (mode == "mean")
    return std::accumulate(runs.begin(), runs.end(), 0.0) / static_cast<double>(runs.size());
  if (mode == "median") return quantile(std::move(runs), 0.5);
  if (mode == "min") return *std::min_element(runs.begin(), runs.end());
  if (mode == "max") return *std::max_element(runs.begin(), runs.end());
  TS_ERROR(ValueError) << "do_bench: return_mode must be mean, median, min or max, got '" << mode
                       << "'";
}

std::vector<double> bench_runs(const std::function<void()>& fn, const std::function<void()>& setup,
                               const std::function<void()>& teardown, double warmup, double rep,
                               bool flush) {
  TS_CHECK(warmup >= 0 && rep > 0, ValueError)
      << "do_bench: warmup must be >= 0 and rep > 0 (ms), got " << warmup << " and " << rep;
  // Estimate one call (and its untimed overhead) from 5 calls.
  auto one = [&](double* overhead) {
    const auto t0 = Clock::now();
    if (flush) flush_cache();
    if (setup) setup();
    // GPU work is asynchronous: wait for what setup queued, then for what fn queued.
    runtime::cuda::synchronize_used();
    const auto t1 = Clock::now();
    fn();
    runtime::cuda::synchronize_used();
    const double ms = ms_since(t1);
    const auto t2 = Clock::now();
    if (teardown) teardown();
    if (overhead)
      *overhead += std::chrono::duration<double, std::milli>(t1 - t0).count() + ms_since(t2);
    return ms;
  };
  double est = 0, extra = 0;
  for (int i = 0; i < 5; ++i) est += one(&extra);
  est /= 5;
  extra /= 5;
  // The budgets are wall time, flushes included, as Triton's are with its (cheap) GPU flush.
  const double per_call = std::max(est + extra, 1e-6);
  const int64_t n_warmup = std::max<int64_t>(1, static_cast<int64_t>(warmup / per_call));
  const int64_t n_repeat = std::max<int64_t>(1, static_cast<int64_t>(rep / per_call));
  for (int64_t i = 0; i < n_warmup; ++i) one(nullptr);
  std::vector<double> runs;
  runs.reserve(static_cast<size_t>(n_repeat));
  for (int64_t i = 0; i < n_repeat; ++i) runs.push_back(one(nullptr));
  return runs;
}

namespace {

namespace rc = runtime::cuda;

// A buffer twice the device's L2 cache (256 MB where the size is unknown), from the caching
// allocator for one timing loop; a flush fills it on the current stream. Released when the loop
// ends (its block then serves later tensors on the stream).
class GpuFlush {
 public:
  explicit GpuFlush(int device) : device_(device) {
    const size_t l2 = rc::device_info(device).l2_bytes;
    bytes_ = l2 ? 2 * l2 : size_t{256} << 20;
    buf_ = rc::allocate(bytes_, device);
  }
  ~GpuFlush() { rc::release(buf_, device_); }
  GpuFlush(const GpuFlush&) = delete;
  GpuFlush& operator=(const GpuFlush&) = delete;
  void operator()() { rc::fill(buf_, ++tick_, 4, bytes_ / 4, device_); }

 private:
  int device_;
  size_t bytes_ = 0;
  void* buf_ = nullptr;
  uint32_t tick_ = 0;
};

// The 95% interval of the median of `n` sorted runs: order statistics n/2 -+ 0.98 sqrt(n).
std::pair<double, double> median_interval(const std::vector<double>& sorted) {
  const double n = static_cast<double>(sorted.size());
  const double half = 0.98 * std::sqrt(n);
  const auto at = [&](double i) { return sorted[static_cast<size_t>(std::clamp(i, 0.0, n - 1))]; };
  return {at(std::floor(n / 2 - half)), at(std::ceil(n / 2 + half))};
}

}  // namespace

BenchStopReason bench_stop(std::vector<double> runs, double beat) {
  if (runs.size() < 20) return BenchStopReason::More;
  std::sort(runs.begin(), runs.end());
  const auto [lo, hi] = median_interval(runs);
  const size_t m = runs.size() / 2;
  const double median = runs.size() % 2 ? runs[m] : (runs[m - 1] + runs[m]) / 2;
  if (std::isfinite(beat) && lo > 1.05 * beat) return BenchStopReason::CannotWin;
  if (hi - lo <= 0.01 * median) return BenchStopReason::MedianKnown;
  return BenchStopReason::More;
}

std::vector<double> gpu_bench_runs(const std::function<void()>& fn,
                                   const std::function<void()>& setup,
                                   const std::function<void()>& teardown, double warmup, double rep,
                                   bool flush, int device, double beat, BenchStop* why) {
  TS_CHECK(warmup >= 0 && rep > 0, ValueError)
      << "do_bench: warmup must be >= 0 and rep > 0 (ms), got " << warmup << " and " << rep;
  const rc::Stream stream = rc::current_stream(device);
  std::optional<GpuFlush> flush_l2;
  if (flush) flush_l2.emplace(device);
  auto queue = [&](rc::Event* start, rc::Event* end) {
    if (setup) setup();
    if (flush_l2) (*flush_l2)();
    if (start) start->record(stream);
    fn();
    if (end) end->record(stream);
    if (teardown) teardown();
  };
  // One run's wall time (host and GPU together, flush included) from 5 runs.
  stream.synchronize();
  auto t0 = Clock::now();
  for (int i = 0; i < 5; ++i) queue(nullptr, nullptr);
  stream.synchronize();
  const double per_call = std::max(ms_since(t0) / 5, 1e-4);
  const int64_t n_warmup = std::max<int64_t>(1, static_cast<int64_t>(warmup / per_call));
  const int64_t n_repeat =
      std::clamp<int64_t>(static_cast<int64_t>(rep / per_call), 1, int64_t{1} << 14);
  for (int64_t i = 0; i < n_warmup; ++i) queue(nullptr, nullptr);
  // Timed runs in batches; after each, the stopping rules.
  std::vector<double> runs;
  std::vector<std::unique_ptr<rc::Event>> events;
  const int64_t batch = std::clamp<int64_t>(n_repeat / 8, 10, 200);
  BenchStopReason stop = BenchStopReason::More;
  while (static_cast<int64_t>(runs.size()) < n_repeat) {
    const int64_t k = std::min<int64_t>(batch, n_repeat - static_cast<int64_t>(runs.size()));
    while (static_cast<int64_t>(events.size()) < 2 * k)
      events.push_back(std::make_unique<rc::Event>(device));
    for (int64_t i = 0; i < k; ++i) queue(events[2 * i].get(), events[2 * i + 1].get());
    events[2 * k - 1]->synchronize();
    for (int64_t i = 0; i < k; ++i)
      runs.push_back(rc::Event::elapsed_ms(*events[2 * i], *events[2 * i + 1]));
    stop = bench_stop(runs, beat);
    if (stop != BenchStopReason::More) break;
  }
  if (why) *why = {stop == BenchStopReason::More ? BenchStopReason::Budget : stop, runs.size()};
  return runs;
}

}  // namespace detail

double do_bench(const std::function<void()>& fn, double warmup, double rep) {
  BenchOptions o;
  o.warmup = warmup;
  o.rep = rep;
  return do_bench(fn, o);
}

double do_bench(const std::function<void()>& fn, const BenchOptions& o) {
  auto runs = detail::bench_runs(fn, nullptr, nullptr, o.warmup, o.rep, o.flush_cache);
  return detail::summarize(std::move(runs), o.return_mode);
}

std::vector<double> do_bench_quantiles(const std::function<void()>& fn,
                                       std::vector<double> quantiles, double warmup, double rep) {
  for (double q : quantiles) {
    TS_CHECK(q >= 0 && q <= 1, ValueError) << "do_bench: quantiles must be in [0, 1], got " << q;
  }
  const auto runs = detail::bench_runs(fn, nullptr, nullptr, warmup, rep, true);
  std::vector<double> out;
  for (double q : quantiles) out.push_back(detail::quantile(runs, q));
  return out;
}

// ---- perf_report
// ---------------------------------------------------------------------------------

double BenchArgs::operator[](const std::string& name) const {
  auto it = values.find(name);
  TS_CHECK(it != values.end(), ValueError)
      << "perf_report: the benchmark has no argument '" << name << "'";
  return it->second;
}

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string line_name(const Benchmark& b, size_t l) {
  return l < b.line_names.size() ? b.line_names[l] : b.line_vals[l];
}

std::string x_header(const Benchmark& b) {
  std::string h;
  for (const auto& n : b.x_names) h += (h.empty() ? "" : ", ") + n;
  return h.empty() ? "x" : h;
}

std::string x_str(const Benchmark& b, size_t r) {
  return r < b.x_labels.size() ? b.x_labels[r] : num(b.x_vals[r]);
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}

}  // namespace

std::string PerfTable::markdown() const {
  std::ostringstream os;
  os << "| " << x_header(bench) << " |";
  for (size_t l = 0; l < bench.line_vals.size(); ++l)
    os << " " << line_name(bench, l) << " (" << bench.ylabel << ") |";
  os << "\n|---|";
  for (size_t l = 0; l < bench.line_vals.size(); ++l) os << "---|";
  os << "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    os << "| " << x_str(bench, r) << " |";
    for (const auto& m : rows[r]) os << " " << num(m.y) << " |";
    os << "\n";
  }
  return os.str();
}

std::string PerfTable::csv() const {
  std::ostringstream os;
  os << x_header(bench);
  for (size_t l = 0; l < bench.line_vals.size(); ++l) {
    const std::string n = line_name(bench, l);
    os << "," << n << "," << n << " min," << n << " max";
  }
  os << "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    os << x_str(bench, r);
    for (const auto& m : rows[r])
      os << "," << num(m.y) << "," << num(m.y_min) << "," << num(m.y_max);
    os << "\n";
  }
  return os.str();
}

std::string PerfTable::svg(int width, int height) const {
  static const char* palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
  const double left = 70, right = 150, top = 40, bottom = 50;
  const double pw = width - left - right, ph = height - top - bottom;
  auto tx = [&](double v) { return bench.x_log ? std::log10(std::max(v, 1e-300)) : v; };
  auto ty = [&](double v) { return bench.y_log ? std::log10(std::max(v, 1e-300)) : v; };
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (size_t r = 0; r < rows.size(); ++r) {
    x0 = std::min(x0, tx(bench.x_vals[r]));
    x1 = std::max(x1, tx(bench.x_vals[r]));
    for (const auto& m : rows[r]) {
      if (!std::isfinite(m.y)) continue;
      y0 = std::min(y0, ty(std::min(m.y_min, m.y)));
      y1 = std::max(y1, ty(std::max(m.y_max, m.y)));
    }
  }
  const bool bars = !bench.x_labels.empty();
  if (bars) {  // categories at 0..n-1, each a group of bars half a slot wide either side
    x0 = -0.5;
    x1 = static_cast<double>(rows.size()) - 0.5;
  }
  if (!(x1 > x0)) x1 = x0 + 1;
  if (!(y1 > y0)) y1 = y0 + 1;
  int y_ticks = 4;
  if (!bench.y_log) {  // 0 at the bottom, round steps (1, 2 or 5 x 10^k) up to the top
    y0 = std::min(y0, 0.0);
    const double raw = (y1 - y0) / 4, mag = std::pow(10, std::floor(std::log10(raw)));
    const double step = raw / mag <= 1   ? mag
                        : raw / mag <= 2 ? 2 * mag
                        : raw / mag <= 5 ? 5 * mag
                                         : 10 * mag;
    y0 = std::floor(y0 / step) * step;
    y1 = std::ceil(y1 / step) * step;
    y_ticks = static_cast<int>(std::lround((y1 - y0) / step));
  } else if (bars) {  // whole decades, so that the smallest bar still shows
    y0 = std::floor(y0) - (std::floor(y0) == y0 ? 1 : 0);
    y1 = std::ceil(y1);
    y_ticks = static_cast<int>(y1 - y0);
  }
  auto px = [&](double v) { return left + ((bars ? v : tx(v)) - x0) / (x1 - x0) * pw; };
  auto py = [&](double v) { return top + ph - (ty(v) - y0) / (y1 - y0) * ph; };
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "<text x=\"" << left + pw / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">"
     << xml_escape(bench.plot_name) << "</text>\n";
  os << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
     << "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (int t = 0; t <= y_ticks; ++t) {  // y ticks
    const double yv = y0 + (y1 - y0) * t / y_ticks, yp = top + ph - ph * t / y_ticks;
    os << "<line x1=\"" << left - 4 << "\" y1=\"" << yp << "\" x2=\"" << left + pw << "\" y2=\""
       << yp << "\" stroke=\"#ddd\"/>\n<text x=\"" << left - 6 << "\" y=\"" << yp + 4
       << "\" text-anchor=\"end\">" << num(bench.y_log ? std::pow(10, yv) : yv) << "</text>\n";
  }
  for (size_t r = 0; r < rows.size(); ++r) {  // x ticks
    os << "<text x=\"" << px(bars ? static_cast<double>(r) : bench.x_vals[r]) << "\" y=\""
       << top + ph + 16 << "\" text-anchor=\"middle\">" << xml_escape(x_str(bench, r))
       << "</text>\n";
  }
  os << "<text x=\"" << left + pw / 2 << "\" y=\"" << height - 10 << "\" text-anchor=\"middle\">"
     << xml_escape(bench.xlabel.empty() ? x_header(bench) : bench.xlabel) << "</text>\n";
  os << "<text transform=\"translate(16," << top + ph / 2
     << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(bench.ylabel) << "</text>\n";
  for (size_t l = 0; l < bench.line_vals.size(); ++l) {
    const std::string color = l < bench.styles.size() ? bench.styles[l].first : palette[l % 6];
    const std::string dash = l < bench.styles.size() ? bench.styles[l].second : "-";
    const char* dasharray = dash == "--"   ? "6,4"
                            : dash == ":"  ? "2,3"
                            : dash == "-." ? "6,3,2,3"
                                           : "";
    const double ly = top + 14 + 18.0 * static_cast<double>(l);
    if (bars) {  // bar l of each group, its min/max as a whisker; a missing value draws nothing
      const double slot = pw / static_cast<double>(rows.size());
      const double bw = 0.8 * slot / static_cast<double>(bench.line_vals.size());
      const double base = py(bench.y_log ? std::pow(10, y0) : std::max(y0, 0.0));
      for (size_t r = 0; r < rows.size(); ++r) {
        const Measure& m = rows[r][l];
        if (!std::isfinite(m.y)) continue;
        const double x = left + slot * (static_cast<double>(r) + 0.1) + bw * static_cast<double>(l);
        const double top_y = py(m.y);
        os << "<rect x=\"" << x << "\" y=\"" << std::min(top_y, base) << "\" width=\"" << bw
           << "\" height=\"" << std::abs(base - top_y) << "\" fill=\"" << color << "\"/>\n";
        if (m.y_min != m.y || m.y_max != m.y)
          os << "<line x1=\"" << x + bw / 2 << "\" y1=\"" << py(m.y_min) << "\" x2=\"" << x + bw / 2
             << "\" y2=\"" << py(m.y_max) << "\" stroke=\"#222\"/>\n";
      }
      os << "<rect x=\"" << left + pw + 10 << "\" y=\"" << ly - 10
         << "\" width=\"20\" height=\"10\" fill=\"" << color << "\"/>\n<text x=\"" << left + pw + 34
         << "\" y=\"" << ly << "\">" << xml_escape(line_name(bench, l)) << "</text>\n";
      continue;
    }
    // The min/max band, then the line.
    std::ostringstream band, line;
    for (size_t r = 0; r < rows.size(); ++r)
      band << (r ? " " : "") << px(bench.x_vals[r]) << "," << py(rows[r][l].y_max);
    for (size_t r = rows.size(); r-- > 0;)
      band << " " << px(bench.x_vals[r]) << "," << py(rows[r][l].y_min);
    for (size_t r = 0; r < rows.size(); ++r)
      line << (r ? " " : "") << px(bench.x_vals[r]) << "," << py(rows[r][l].y);
    os << "<polygon points=\"" << band.str() << "\" fill=\"" << color
       << "\" fill-opacity=\"0.15\" stroke=\"none\"/>\n";
    os << "<polyline points=\"" << line.str() << "\" fill=\"none\" stroke=\"" << color
       << "\" stroke-width=\"2\""
       << (*dasharray ? std::string(" stroke-dasharray=\"") + dasharray + "\"" : "") << "/>\n";
    os << "<line x1=\"" << left + pw + 10 << "\" y1=\"" << ly - 4 << "\" x2=\"" << left + pw + 30
       << "\" y2=\"" << ly - 4 << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n<text x=\""
       << left + pw + 34 << "\" y=\"" << ly << "\">" << xml_escape(line_name(bench, l))
       << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

PerfTable PerfTable::parse_csv(const std::string& text, Benchmark base) {
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream is(line);
    while (std::getline(is, cell, ',')) {
      while (!cell.empty() && (cell.back() == '\r' || cell.back() == ' ')) cell.pop_back();
      while (!cell.empty() && cell.front() == ' ') cell.erase(cell.begin());
      cells.push_back(cell);
    }
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    return cells;
  };
  auto number = [](const std::string& c, double& v) {
    if (c.empty()) return false;
    char* end = nullptr;
    v = std::strtod(c.c_str(), &end);
    return end == c.c_str() + c.size();
  };
  std::istringstream is(text);
  std::string line;
  std::vector<std::vector<std::string>> lines;
  while (std::getline(is, line)) {
    if (!line.empty() && line != "\r") lines.push_back(split(line));
  }
  TS_CHECK(lines.size() >= 2, ValueError)
      << "perf_report CSV: a header line and at least one row are needed";
  const auto& head = lines[0];
  TS_CHECK(head.size() >= 2, ValueError) << "perf_report CSV: the header has no value column";
  // csv()'s layout: each line's name, then "<name> min" and "<name> max".
  bool triples = (head.size() - 1) % 3 == 0;
  for (size_t c = 1; triples && c + 2 < head.size(); c += 3)
    triples = head[c + 1] == head[c] + " min" && head[c + 2] == head[c] + " max";
  const size_t step = triples ? 3 : 1;
  PerfTable t;
  t.bench = std::move(base);
  t.bench.x_names = {head[0]};
  t.bench.line_vals.clear();
  t.bench.line_names.clear();
  for (size_t c = 1; c < head.size(); c += step) t.bench.line_vals.push_back(head[c]);
  bool categories = false;
  for (size_t r = 1; r < lines.size(); ++r) {
    double v = 0;
    categories = categories || !number(lines[r][0], v);
  }
  t.bench.x_vals.clear();
  t.bench.x_labels.clear();
  for (size_t r = 1; r < lines.size(); ++r) {
    const auto& cells = lines[r];
    TS_CHECK(cells.size() == head.size(), ValueError)
        << "perf_report CSV line " << r + 1 << ": " << cells.size() << " cells, the header has "
        << head.size();
    double x = static_cast<double>(r - 1);
    if (categories) {
      t.bench.x_labels.push_back(cells[0]);
    } else {
      number(cells[0], x);
    }
    t.bench.x_vals.push_back(x);
    std::vector<Measure> row;
    for (size_t c = 1; c < cells.size(); c += step) {
      double v[3] = {std::nan(""), 0, 0};
      for (size_t k = 0; k < step; ++k) {
        // An empty cell is a missing value (a peer that did not run): drawn as nothing.
        TS_CHECK(cells[c + k].empty() || number(cells[c + k], v[k]), ValueError)
            << "perf_report CSV line " << r + 1 << ": '" << cells[c + k] << "' is not a number";
        if (cells[c + k].empty()) v[k] = std::nan("");
      }
      if (std::isnan(v[1]) || std::isnan(v[2])) v[1] = v[2] = v[0];
      row.push_back(step == 3 ? Measure(v[0], v[1], v[2]) : Measure(v[0]));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

PerfTable perf_report(const Benchmark& bench, const std::function<Measure(const BenchArgs&)>& fn,
                      bool print_data, const std::string& save_path) {
  TS_CHECK(!bench.x_vals.empty() && !bench.line_vals.empty(), ValueError)
      << "perf_report '" << bench.plot_name << "': x_vals and line_vals must not be empty";
  TS_CHECK(bench.line_names.empty() || bench.line_names.size() == bench.line_vals.size(),
           ValueError)
      << "perf_report '" << bench.plot_name << "': line_names has " << bench.line_names.size()
      << " entries for " << bench.line_vals.size() << " line_vals";
  PerfTable t;
  t.bench = bench;
  for (double x : bench.x_vals) {
    std::vector<Measure> row;
    for (const auto& lv : bench.line_vals) {
      BenchArgs a;
      a.values = bench.args;
      for (const auto& n : bench.x_names) a.values[n] = x;
      a.line = lv;
      row.push_back(fn(a));
    }
    t.rows.push_back(std::move(row));
  }
  if (print_data) std::cout << bench.plot_name << ":\n" << t.markdown() << std::flush;
  if (!save_path.empty()) {
    ::mkdir(save_path.c_str(), 0755);
    const std::string base = save_path + "/" + bench.plot_name;
    for (const auto& [ext, text] : {std::pair<std::string, std::string>{".csv", t.csv()},
                                    {".md", t.markdown()},
                                    {".svg", t.svg()}}) {
      std::ofstream f(base + ext);
      f << text;
      TS_CHECK(f.good(), RuntimeError) << "perf_report: cannot write " << base + ext;
    }
  }
  return t;
}

}  // namespace tessera::testing
