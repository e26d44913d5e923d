// `tessera demo` (what `make demo` runs): the seed walkthrough, as far as tessera has grown.
// Each section shows only what exists.
#include <cstdlib>
#include <iostream>
#include <map>

#include "examples/seed_autotune.h"
#include "examples/seed_composability.h"
#include "tessera/compile.h"
#include "tessera/env.h"
#include "tessera/tl.h"
#include "tools/tessera/commands.h"

namespace tl = tessera::tl;

// The seed's kernel, as the recipe writes it.
TL_JIT(add_kernel, tl::Ptr in_ptr0, tl::Ptr in_ptr1, tl::Ptr out_ptr, tl::Int n_elements,
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

// An off-by-one mask (`<=`): it reads and writes one element past the end of its tensors.
TL_JIT(off_by_one_kernel, tl::Ptr x_ptr, tl::Ptr out_ptr, tl::Int n, tl::Const BLOCK) {
  auto offsets = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offsets <= n;
  tl::store(out_ptr + offsets, tl::load(x_ptr + offsets, mask) * 2.0f, mask);
}

namespace tessera::cli {
namespace {

void section(const char* title) {
  std::cout << "\n== " << title << " ==\n";
}

// A dispatch mode that counts operator calls (the hook FlopCounterMode is built on).
struct CountingMode : DispatchMode {
  std::map<std::string, int> calls;
  void handle(const OperatorHandle& op, Stack& stack) override {
    ++calls[op.name()];
    op.redispatch(stack);
  }
};

}  // namespace

int demo() {
  // The seed's device: the GPU when one is present (user kernels and tessera::compile run there;
  // the built-in operators' sections stay on the CPU).
  const Device dev = cuda_is_available() ? Device("cuda") : kCPU;
  std::cout << "tessera " << version() << " demo (device: " << dev.str() << ")\n";

  section("Basic usage: a user-defined kernel (add_kernel, BLOCK_SIZE=4)");
  Tensor x = randn({4}, TensorOptions().device(dev));
  Tensor y = randn({4}, TensorOptions().device(dev));
  Tensor out = zeros_like(x);
  auto n_elements = out.numel();
  auto grid = [&](const tl::Meta& meta) {
    return tl::Grid{tl::cdiv(n_elements, meta["BLOCK_SIZE"])};
  };
  add_kernel[grid](x, y, out, n_elements, tl::meta("BLOCK_SIZE", 4));
  std::cout << "Vector addition of\nX:\t" << x << "\nY:\t" << y << "\nis equal to\n" << out << "\n";
  std::cout << "("
            << (add_kernel.last_from_disk()
                    ? "loaded from the kernel cache"
                    : "compiled in " +
                          std::to_string(static_cast<int>(add_kernel.last_compile_ms())) + " ms")
            << "; equals x + y: " << (equal(out.cpu(), x.cpu() + y.cpu()) ? "yes" : "NO") << ")\n";

  section("torch.compile: tessera::compile(add_fn, {.fullgraph = true})");
  auto add_fn = [](const Tensor& a, const Tensor& b) {
    Tensor output = zeros_like(a);
    auto n = output.numel();
    auto g = [&](const tl::Meta& meta) { return tl::Grid{tl::cdiv(n, meta["BLOCK_SIZE"])}; };
    add_kernel[g](a, b, output, n, tl::meta("BLOCK_SIZE", 4));
    return output;
  };
  auto compiled = compile(add_fn, {.fullgraph = true, .name = "add_fn"});
  Tensor out2 = compiled(x, y);
  std::cout << "Vector addition of\nX:\t" << x << "\nY:\t" << y << "\nis equal to\n"
            << out2 << "\n";
  std::cout << "(equals x + y: " << (equal(out2.cpu(), x.cpu() + y.cpu()) ? "yes" : "NO") << ")\n";
  for (int64_t n : {5, 6, 4096}) {
    Tensor a = randn({n}, TensorOptions().device(dev)), b = randn({n}, TensorOptions().device(dev));
    std::cout << "n = " << n << ": equals a + b: "
              << (equal(compiled(a, b).cpu(), a.cpu() + b.cpu()) ? "yes" : "NO")
              << ", graphs compiled so far: " << compiled.stats().graphs << "\n";
  }
  std::cout << "The graph, dynamic after the size changed once:\n" << compiled.stats().last_graph;

  // The built-in operators run on the CPU (their CUDA kernels come with the graph compiler's
  // lowering): the sections below use CPU tensors.
  x = x.cpu();
  y = y.cpu();
  section("Calling an operator by name (torch.ops.aten.add.Tensor)");
  manual_seed(0);
  Tensor z = ops("aten::add.Tensor")(x, y, kw("alpha", 2));
  std::cout << "ops(\"aten::add.Tensor\")(x, y, alpha=2) = " << z << "\n";
  std::cout << "schema: " << get_op("aten::add.Tensor").schema() << "\n";

  section("Shapes without data: meta tensors run shape functions");
  Tensor m = empty({8, 1024}, Device("meta"));
  Tensor w = empty({1024, 512}, Device("meta"));
  std::cout << "softmax(m @ w, -1) = " << softmax(matmul(m, w), -1) << "\n";

  section("A dispatch mode sees every operator call");
  CountingMode counter;
  {
    ModeGuard guard(&counter, ModeKind::Dispatch);
    Tensor a = rand({16, 32});
    Tensor b = linear(a, rand({8, 32}), rand({8}));
    (void)layer_norm(b.relu(), {8});
  }
  for (const auto& [name, n] : counter.calls) std::cout << "  " << name << ": " << n << "\n";

  const bool tuned = seed_autotune::run(std::cout);

  section("Beyond the peers: TESSERA_DEBUG=1 checks every load and store against its tensor");
  {
    Tensor buf = randn({24}), obuf = zeros({24});
    Tensor xs = buf.slice(0, 0, 20), outs = obuf.slice(0, 0, 20);  // views into larger buffers
    ::setenv("TESSERA_DEBUG", "1", 1);
    reload_knobs();
    std::cout << "off_by_one_kernel (mask `offsets <= n`) on 20 elements:" << std::endl;
    off_by_one_kernel[{tl::cdiv(20, 8)}](xs, outs, 20, tl::meta("BLOCK", 8));
    ::unsetenv("TESSERA_DEBUG");
    reload_knobs();
    std::cout << "  the bad lanes were suppressed: the element after the view is still "
              << obuf[20].item<float>()
              << "; the other 20 are right: " << (allclose(outs, xs * 2.0) ? "yes" : "NO") << "\n";
  }
  const bool composed = seed_composability::run(std::cout);

  std::cout << "\n"
            << all_ops().size()
            << " operators registered; run `tessera doctor` for this machine.\n";
  return composed && tuned ? 0 : 1;
}

}  // namespace tessera::cli
