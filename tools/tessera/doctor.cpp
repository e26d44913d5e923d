// `tessera doctor`: what tessera finds on this machine. Nothing missing here is an error: a
// machine without a GPU or NVRTC runs everything on the CPU.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/cuda/context.h"
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/thread_pool.h"
#include "tools/tessera/commands.h"

namespace tessera::cli {
namespace {

std::string first_line_of(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r")) {
    std::array<char, 256> buf{};
    if (fgets(buf.data(), buf.size(), p)) out = buf.data();
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string cpu_model_and_flags(std::vector<std::string>& features) {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model;
  bool flags_done = false;
  while (std::getline(f, line)) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 2);
    if (!flags_done && line.rfind("flags", 0) == 0) {
      std::istringstream ss(line.substr(line.find(':') + 1));
      std::string flag;
      while (ss >> flag) {
        for (const char* want : {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw",
                                 "avx512_bf16", "avx512_fp16", "amx_tile"}) {
          if (flag == want) features.push_back(flag);
        }
      }
      flags_done = true;
    }
  }
  return model.empty() ? "unknown" : model;
}

std::string find_cxx() {
  if (!knobs().cxx.empty()) return knobs().cxx;
  for (const char* c : {"c++", "g++", "clang++"}) {
    if (!first_line_of(std::string("command -v ") + c).empty()) return c;
  }
  return "";
}

}  // namespace

int doctor() {
  std::cout << "tessera " << version() << " (build " << build_id() << ")\n";
  std::vector<std::string> features;
  const std::string model = cpu_model_and_flags(features);
  std::cout << "cpu:        " << model << ", " << sysconf(_SC_NPROCESSORS_ONLN) << " cores, "
            << runtime::num_threads() << " threads in the pool\n";
  std::cout << "cpu features:";
  for (const auto& f : features) std::cout << " " << f;
  std::cout << "\n";
  const std::string cxx = find_cxx();
  std::cout << "c++ compiler (kernel JIT): "
            << (cxx.empty() ? "none found (set TESSERA_CXX)"
                            : cxx + ": " + first_line_of(cxx + " --version"))
            << "\n";
  std::cout << "matmul:     " << matmul_backend() << "\n";
  std::string why;
  if (const auto* d = runtime::cuda::driver(&why)) {
    std::cout << "cuda driver: " << d->path << ", CUDA " << d->version / 1000 << "."
              << (d->version % 1000) / 10 << ", " << runtime::cuda::device_count() << " GPU(s)\n";
    for (int i = 0; i < runtime::cuda::device_count(); ++i) {
      const auto& g = runtime::cuda::device_info(i);
      std::cout << "  cuda:" << i << ": " << g.name << ", compute capability " << g.major << "."
                << g.minor << ", " << g.multiprocessors << " SMs, " << std::fixed
                << std::setprecision(1) << static_cast<double>(g.total_memory) / (1 << 30)
                << " GiB, L2 " << (g.l2_bytes >> 20) << " MiB\n";
    }
  } else {
    std::cout << "cuda driver: none (" << why << "; fine: everything runs on the CPU)\n";
  }
  std::string nvrtc_why;
  if (const auto* n = runtime::cuda::nvrtc(&nvrtc_why)) {
    std::cout << "nvrtc:      " << n->path << ", " << n->major << "." << n->minor
              << " (compiles CUDA kernels with or without a GPU)\n";
  } else {
    std::cout << "nvrtc:      none found (" << nvrtc_why << ")\n";
  }
  std::string cublas_why;
  if (const auto* c = runtime::cuda::cublas(&cublas_why)) {
    std::cout << "cublas:     " << c->path << ", " << c->major << "." << c->minor
              << " (matmul on CUDA tensors)\n";
  } else {
    std::cout << "cublas:     none found (" << cublas_why
              << "; matmul on CUDA tensors runs tessera's own tile kernel)\n";
  }
  std::cout << "cache dir:  " << knobs().cache_dir << "\n";
  return 0;
}

}  // namespace tessera::cli
