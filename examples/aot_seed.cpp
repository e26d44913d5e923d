// Ahead-of-time packages (docs/aot.md): the seed's `add_fn` (a user kernel behind a dead fill) and
// its `mysin` triton_op are exported once, then loaded and run by a second process that has no
// C++ compiler: this program runs itself again with PATH emptied and TESSERA_CXX pointing nowhere,
// so any code generation there would fail. With a GPU the packages hold cubins and run there
// (`--cpu` keeps them on the CPU). Exits non-zero when a result differs from eager.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include <tessera/aot.h>
#include <tessera/library.h>
#include <tessera/tessera.h>
#include <tessera/tl.h>

namespace tl = tessera::tl;
namespace aot = tessera::aot;
using tessera::Tensor;

TL_JIT(add_kernel, tl::Ptr in_ptr0, tl::Ptr in_ptr1, tl::Ptr out_ptr, tl::Int n_elements,
       tl::Const BLOCK_SIZE) {
  auto offsets = tl::program_id(0) * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  tl::store(out_ptr + offsets,
            tl::load(in_ptr0 + offsets, mask) + tl::load(in_ptr1 + offsets, mask), mask);
}

TL_JIT(sin_kernel, tl::Ptr in_ptr0, tl::Ptr out_ptr, tl::Int n_elements, tl::Const BLOCK_SIZE) {
  auto offsets = tl::program_id(0) * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  tl::store(out_ptr + offsets, tl::sin(tl::load(in_ptr0 + offsets, mask)), mask);
}

Tensor add_fn(const Tensor& x, const Tensor& y) {
  Tensor output = tessera::zeros_like(x);
  auto n_elements = output.numel();
  auto grid = [&](const tl::Meta& meta) {
    return tl::Grid{tl::cdiv(n_elements, meta["BLOCK_SIZE"])};
  };
  add_kernel[grid](x, y, output, n_elements, tl::meta("BLOCK_SIZE", 256));
  return output;
}

// The loading process: no compiler reachable; the packages run, checked against eager operators.
// (The results are compared on the CPU: nothing here compiles a kernel.)
int load_and_run(const std::string& dir, const tessera::Device dev) {
  bool ok = true;
  aot::Package add = aot::load(dir + "/add_fn.tspkg");
  aot::Package sin = aot::load(dir + "/mysin.tspkg");
  for (int64_t n : {1000, 4096, 100003}) {
    Tensor x = tessera::randn({n}), y = tessera::randn({n});
    Tensor s = add(x.to(dev), y.to(dev))[0].to_tensor().cpu();
    Tensor z = sin(x.to(dev))[0].to_tensor().cpu();
    const bool add_ok = tessera::equal(s, x + y);
    const bool sin_ok = tessera::allclose(z, x.sin(), 1e-6, 1e-6);
    std::cout << "  n = " << n << ": add_fn " << (add_ok ? "ok" : "WRONG") << ", mysin "
              << (sin_ok ? "ok" : "WRONG") << "\n";
    ok = ok && add_ok && sin_ok;
  }
  try {
    add(tessera::randn({8}).to(dev), tessera::randn({8}).to(dev));
    ok = false;
  } catch (const tessera::ShapeError& e) {
    std::cout << "  a size outside the Dim's range: " << e.message() << "\n";
  }
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--load")
    return load_and_run(argv[2], tessera::Device(argv[3]));
  const bool cpu = argc == 2 && std::string(argv[1]) == "--cpu";
  const tessera::Device dev =
      !cpu && tessera::cuda_is_available() ? tessera::Device("cuda") : tessera::Device("cpu");
  char tmpl[] = "/tmp/tessera-aot-example-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  // Export: the kernels compile now, for this CPU's x86-64 level or this GPU's architecture.
  aot::ExportOptions o;
  o.name = "add_fn";
  o.dynamic_shapes = {{0, 0, aot::Dim("n", 16, 1 << 24)}, {1, 0, aot::Dim("n", 16, 1 << 24)}};
  aot::compile(dir + "/add_fn.tspkg", add_fn, o, tessera::randn({4096}).to(dev),
               tessera::randn({4096}).to(dev));
  auto mysin = tessera::library::triton_op(
      "aot_example::mysin",
      [](const Tensor& x) {
        Tensor out = tessera::empty_like(x);
        auto n_elements = x.numel();
        tessera::library::wrap_triton(sin_kernel)[{tl::cdiv(n_elements, 256)}](
            x, out, n_elements, tl::meta("BLOCK_SIZE", 256));
        return out;
      },
      {.mutates_args = {}, .arg_names = {"x"}});
  aot::ExportOptions so;
  so.name = "mysin";
  so.dynamic_shapes = {{0, 0, aot::Dim("n", 16, 1 << 24)}};
  aot::compile(
      dir + "/mysin.tspkg", [&](const Tensor& x) { return mysin(x); }, so,
      tessera::randn({4096}).to(dev));
  const aot::PackageInfo info = aot::inspect(dir + "/add_fn.tspkg");
  std::cout << "exported " << info.name << " ("
            << (info.device == "cuda" ? info.cuda_archs.at(0) : info.isa) << "), schedule:";
  for (const auto& n : info.nodes) std::cout << " [" << n << "]";
  std::cout << "\nloading and running them in a process with no compiler on PATH:\n";
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("PATH", "/nonexistent", 1);
    ::setenv("TESSERA_CXX", "/nonexistent/c++", 1);
    ::execl("/proc/self/exe", argv[0], "--load", dir.c_str(), dev.str().c_str(),
            static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::system(("rm -rf '" + dir + "'").c_str());
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::cout << (ok ? "aot_seed: OK" : "aot_seed: FAILED") << "\n";
  return ok ? 0 : 1;
}
