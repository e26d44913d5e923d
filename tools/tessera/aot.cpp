// `tessera aot inspect|verify|run PACKAGE`: what an AOT package holds, whether it loads on this
// machine, and a run on random inputs of the example's sizes (or `--size NAME=V`) with the time
// per call. Running needs no compiler: nothing here generates code.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>

#include "runtime/cuda/context.h"
#include "tessera/aot.h"
#include "tools/tessera/commands.h"

namespace tessera::cli {
namespace {

void print_info(const aot::PackageInfo& info) {
  std::cout << "package:   " << info.name << "\n"
            << "format:    " << info.format_major << "." << info.format_minor << ", made by "
            << info.created_by << "\n"
            << "sha256:    " << info.sha256 << "\n";
  if (info.device == "cuda") {
    std::cout << "cuda code: ";
    for (size_t i = 0; i < info.cuda_archs.size(); ++i)
      std::cout << (i ? ", " : "") << info.cuda_archs[i];
    std::cout << " (tensors on a GPU)\n";
  } else {
    std::cout << "cpu code:  " << info.isa << " (";
    for (size_t i = 0; i < info.cpu_features.size(); ++i)
      std::cout << (i ? " " : "") << info.cpu_features[i];
    std::cout << ")\n";
  }
  std::cout << "arguments:\n";
  for (const auto& a : info.inputs) std::cout << "  " << a << "\n";
  std::cout << "guards:\n";
  for (const auto& g : info.guards) std::cout << "  " << g << "\n";
  if (info.guards.empty()) std::cout << "  (none beyond the arguments')\n";
  std::cout << "schedule:\n";
  for (const auto& n : info.nodes) std::cout << "  " << n << "\n";
  std::cout << "sections:\n";
  for (const auto& [name, bytes] : info.sections)
    std::cout << "  " << name << ": " << bytes << " bytes\n";
}

}  // namespace

int aot(const std::vector<std::string>& args) {
  TS_CHECK(args.size() >= 2, ValueError)
      << "usage: tessera aot inspect|verify|run PACKAGE [--sha256 HEX] [--size NAME=V]... "
         "[--repeat N] [--device N]";
  const std::string& what = args[0];
  const std::string& path = args[1];
  aot::LoadOptions lo;
  std::map<std::string, int64_t> sizes;
  int repeat = 20;
  for (size_t i = 2; i < args.size(); ++i) {
    const std::string& a = args[i];
    TS_CHECK(i + 1 < args.size(), ValueError) << "aot: " << a << " needs a value";
    const std::string& v = args[++i];
    if (a == "--sha256") {
      lo.expected_sha256 = v;
    } else if (a == "--size") {
      const auto eq = v.find('=');
      TS_CHECK(eq != std::string::npos, ValueError) << "aot: --size takes NAME=VALUE, got " << v;
      sizes[v.substr(0, eq)] = std::stoll(v.substr(eq + 1));
    } else if (a == "--repeat") {
      repeat = std::max(1, std::stoi(v));
    } else if (a == "--device") {
      lo.device = std::stoi(v);
    } else {
      TS_ERROR(ValueError) << "aot: unknown option '" << a << "'";
    }
  }
  if (what == "inspect") {
    print_info(aot::inspect(path, lo));
    return 0;
  }
  TS_CHECK(what == "verify" || what == "run", ValueError)
      << "aot: unknown action '" << what << "' (inspect, verify, run)";
  const auto t0 = std::chrono::steady_clock::now();
  aot::Package p = aot::load(path, lo);
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (what == "verify") {
    std::cout << path << ": ok (loaded in " << load_ms << " ms; sha256 " << p.info().sha256
              << ")\n";
    return 0;
  }
  const bool gpu = p.info().device == "cuda";
  const Device dev = gpu ? Device(DeviceType::CUDA, static_cast<int8_t>(std::max(0, lo.device)))
                         : Device(DeviceType::CPU);
  std::vector<IValue> in;
  for (const aot::PackageArg& a : p.info().args) {
    TS_CHECK(a.tensor, NotImplementedError)
        << "aot run: the package takes a constant argument; call it from C++";
    std::vector<int64_t> shape = a.sizes;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!a.dims[d].empty() && sizes.count(a.dims[d])) shape[d] = sizes[a.dims[d]];
    Tensor t = randn(std::vector<SymInt>(shape.begin(), shape.end()));
    t = a.dtype == DType::Float32 ? t : t.to(a.dtype);
    in.emplace_back(gpu ? t.to(dev) : t);
  }
  std::vector<IValue> out = p.run(in);
  std::vector<double> us;
  for (int r = 0; r < repeat; ++r) {
    if (gpu) runtime::cuda::synchronize(dev.index());
    const auto a = std::chrono::steady_clock::now();
    out = p.run(in);
    if (gpu) runtime::cuda::synchronize(dev.index());  // the time includes the GPU's
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(us.begin(), us.end());
  std::cout << path << ": loaded in " << load_ms << " ms, " << us[us.size() / 2]
            << " us per call (median of " << repeat << (gpu ? ", on " + dev.str() : "") << ")\n";
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].is_tensor()) {
      std::cout << "  result " << i << ": " << out[i].type_name() << "\n";
      continue;
    }
    const Tensor& t = out[i].to_tensor();
    std::cout << "  result " << i << ": " << dtype_name(t.dtype()) << "[";
    for (int64_t d = 0; d < t.dim(); ++d) std::cout << (d ? ", " : "") << t.size(d).expect_int();
    std::cout << "], sum " << t.to(DType::Float64).sum().item<double>() << "\n";
  }
  return 0;
}

}  // namespace tessera::cli
