// The seed's "composability" walkthrough: a triton_op called both ways, trained through a
// backward that calls another triton_op, given a CPU fallback, and counted by FlopCounterMode.
// examples/seed_composability.cpp runs it as a checked example; `tessera demo` prints it.
#pragma once

#include <iostream>

#include <tessera/compile.h>
#include <tessera/library.h>
#include <tessera/tessera.h>

namespace seed_composability {

namespace tl = tessera::tl;
using tessera::Tensor;

TL_JIT(sin_kernel, tl::Ptr in_ptr0, tl::Ptr out_ptr, tl::Int n_elements, tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto block_start = pid * BLOCK_SIZE;
  auto offsets = block_start + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(in_ptr0 + offsets, mask);
  auto output = tl::sin(x);
  tl::store(out_ptr + offsets, output, mask);
}

TL_JIT(cos_kernel, tl::Ptr in_ptr0, tl::Ptr out_ptr, tl::Int n_elements, tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto block_start = pid * BLOCK_SIZE;
  auto offsets = block_start + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(in_ptr0 + offsets, mask);
  auto output = tl::cos(x);
  tl::store(out_ptr + offsets, output, mask);
}

/** Runs the walkthrough, printing as the seed does; returns whether every check held. */
inline bool run(std::ostream& os) {
  using namespace tessera;
  bool ok = true;
  auto check = [&](const char* what, bool good) {
    os << "  " << what << ": " << (good ? "yes" : "NO") << "\n";
    ok = ok && good;
  };

  os << "\n== Composability: a triton_op (mylib::mysin) calling wrap_triton(sin_kernel) ==\n";
  auto mysin = library::triton_op("mylib::mysin",
                                  [](const Tensor& x) {
                                    Tensor out = empty_like(x);
                                    auto n_elements = x.numel();
                                    library::wrap_triton(sin_kernel)[{n_elements}](
                                        x, out, n_elements, tl::meta("BLOCK_SIZE", 4));
                                    return out;
                                  },
                                  {.mutates_args = {}, .arg_names = {"x"}});
  auto mycos = library::triton_op("mylib::mycos",
                                  [](const Tensor& x) {
                                    Tensor out = empty_like(x);
                                    auto n_elements = x.numel();
                                    library::wrap_triton(cos_kernel)[{n_elements}](
                                        x, out, n_elements, tl::meta("BLOCK_SIZE", 4));
                                    return out;
                                  },
                                  {.mutates_args = {}, .arg_names = {"x"}});
  os << "schema: " << mysin.schema() << "\n";
  Tensor x = randn({3});
  Tensor y = mysin(x);
  Tensor z = ops("mylib::mysin.default")(x).to_tensor();
  os << "y = mysin(x)                         = " << y << "\n";
  os << "z = ops(\"mylib::mysin.default\")(x) = " << z << "\n";
  check("allclose(y, x.sin())", allclose(y, x.sin()));
  check("allclose(z, x.sin())", allclose(z, x.sin()));
  auto compiled_mysin = tessera::compile(mysin, {.fullgraph = true, .name = "mysin"});
  Tensor yc = compiled_mysin(x);
  os << "y = tessera::compile(mysin)(x)      = " << yc << "\n";
  check("allclose(compiled y, x.sin())", allclose(yc, x.sin()));
  os << "The graph traces into the triton_op (its name is gone; its kernel is a node):\n"
     << compiled_mysin.stats().last_graph;

  os << "\n== Training support: register_autograd, whose backward calls the mycos triton_op ==\n";
  mysin.register_autograd(
      [&](autograd::AutogradContext& ctx, const Tensor& grad) {
        Tensor xs = ctx.saved(0);
        return grad * mycos(xs);
      },
      [](autograd::AutogradContext& ctx, const Tensor& x, const Tensor& /*output*/) {
        ctx.save_for_backward({x});
      });
  Tensor w = randn({3}).requires_grad_();
  Tensor loss = mysin(w).sum();
  loss.backward();
  os << "w      = " << w << "\nloss   = " << loss << "\nw.grad = " << w.grad() << "\n";
  check("w.grad equals cos(w)", allclose(w.grad(), w.detach().cos()));

  os << "\n== Training under tessera::compile: the forward and the registered backward compiled "
        "==\n";
  auto compiled_loss = tessera::compile([&mysin](const Tensor& t) { return mysin(t).sum(); },
                                        {.fullgraph = true, .name = "mysin_loss"});
  Tensor wc = w.detach().clone().requires_grad_();
  Tensor loss_c = compiled_loss(wc);
  loss_c.backward();
  os << "loss.grad_fn = " << loss_c.grad_fn_name() << "\nw.grad = " << wc.grad() << "\n";
  check("compiled: w.grad equals cos(w)", allclose(wc.grad(), wc.detach().cos()));
  const CompiledGraph trained = compiled_loss.graph();
  check("compiled: the backward is one kernel, mycos's (traced into)",
        trained.backward && trained.backward->kernel_launches() == 1);
  os << "The forward saves x; the backward graph runs mycos's kernel with grad * cos(x) fused:\n"
     << trained.text << (trained.backward ? trained.backward->text : std::string());

  os << "\n== Adding a CPU fallback: register_kernel(\"cpu\", ...) ==\n";
  // The fallback computes what the kernel computes, so it counts its calls to show it ran.
  static int fallback_calls = 0;
  mysin.register_kernel("cpu", [](const Tensor& t) {
    ++fallback_calls;
    return tessera::sin(t);
  });
  Tensor x2 = randn({3});
  const int before = fallback_calls;
  Tensor y2 = mysin(x2);
  os << "mysin(x) with the fallback = " << y2 << "\n";
  check("allclose(mysin(x), x.sin())", allclose(y2, x2.sin()));
  check("the fallback ran (not the kernel)", fallback_calls == before + 1);
  mysin.set_kernel_enabled("cpu", false);  // back to the kernel
  (void)mysin(x2);
  check("disabled, the kernel runs again", fallback_calls == before + 1);

  os << "\n== FLOP counting: FlopCounterMode ==\n";
  os << "Without a formula, tessera derives the count from the kernel's IR. The seed's grid "
        "launches\n"
        "n_elements programs of BLOCK_SIZE=4 lanes, so the kernel executes 4 sines per element "
        "(most\n"
        "lanes masked off); the derived count shows the work as executed:\n";
  Tensor big = randn({1024});
  {
    FlopCounterMode::Options o;
    o.out = &os;
    FlopCounterMode counter(o);
    (void)mysin(big);
  }
  os << "With register_flop_formula(\"mylib::mysin\", numel of the input), training included:\n";
  register_flop_formula("mylib::mysin", [](const std::vector<Shape>& in) { return numel(in[0]); });
  Tensor wb = randn({1024}).requires_grad_();
  {
    FlopCounterMode::Options o;
    o.out = &os;
    FlopCounterMode counter(o);
    mysin(wb).sum().backward();
    check("forward count equals numel",
          counter.counts().at("Global").at("mylib::mysin").forward_flops == 1024);
  }
  return ok;
}

}  // namespace seed_composability
