// Ahead-of-time packages (docs/aot.md): the seed's `add_fn` (a user kernel behind a dead fill) and
// its `mysin` triton_op are exported once, then loaded and run by a second process that has no
// C++ compiler: this program runs itself again with PATH emptied and TESSERA_CXX pointing nowhere,
// so any code generation there would fail. Exits non-zero when a result differs from eager.
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
int load_and_run(const std::string& dir) {
  bool ok = true;
  aot::Package add = aot::load(dir + "/add_fn.tspkg");
  aot::Package sin = aot::load(dir + "/mysin.tspkg");
  for (int64_t n : {1000, 4096, 100003}) {
    Tensor x = tessera::randn({n}), y = tessera::randn({n});
    Tensor s = add(x, y)[0].to_tensor();
    Tensor z = sin(x)[0].to_tensor();
    const bool good = tessera::equal(s, x + y) && tessera::allclose(z, x.sin(), 1e-6, 1e-6);
    std::cout << "  n = " << n << ": add_fn " << (tessera::equal(s, x + y) ? "ok" : "WRONG")
              << ", mysin " << (tessera::allclose(z, x.sin(), 1e-6, 1e-6) ? "ok" : "WRONG") << "\n";
    ok = ok && good;
  }
  try {
    add(tessera::randn({8}), tessera::randn({8}));
    ok = false;
  } catch (const tessera::ShapeError& e) {
    std::cout << "  a size outside the Dim's range: " << e.message() << "\n";
  }
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--load") return load_and_run(argv[2]);
  char tmpl[] = "/tmp/tessera-aot-example-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  // Export: the kernels compile now, for this CPU's x86-64 level.
  aot::ExportOptions o;
  o.name = "add_fn";
  o.dynamic_shapes = {{0, 0, aot::Dim("n", 16, 1 << 24)}, {1, 0, aot::Dim("n", 16, 1 << 24)}};
  aot::compile(dir + "/add_fn.tspkg", add_fn, o, tessera::randn({4096}), tessera::randn({4096}));
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
      dir + "/mysin.tspkg", [&](const Tensor& x) { return mysin(x); }, so, tessera::randn({4096}));
  const aot::PackageInfo info = aot::inspect(dir + "/add_fn.tspkg");
  std::cout << "exported " << info.name << " (" << info.isa << "), schedule:";
  for (const auto& n : info.nodes) std::cout << " [" << n << "]";
  std::cout << "\nloading and running them in a process with no compiler on PATH:\n";
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("PATH", "/nonexistent", 1);
    ::setenv("TESSERA_CXX", "/nonexistent/c++", 1);
    ::execl("/proc/self/exe", argv[0], "--load", dir.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::system(("rm -rf '" + dir + "'").c_str());
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::cout << (ok ? "aot_seed: OK" : "aot_seed: FAILED") << "\n";
  return ok ? 0 : 1;
}
