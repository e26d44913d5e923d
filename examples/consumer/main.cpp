// A program built against an installed tessera (examples/consumer/CMakeLists.txt): a tile
// kernel JIT-compiled at run time, the same kernel under tessera::compile, and built-in ops,
// checked against each other. Prints "consumer: OK" and exits 0 when all agree.
#include <tessera/compile.h>
#include <tessera/tessera.h>
#include <tessera/tl.h>

#include <cstdio>

using namespace tessera;
namespace tl = tessera::tl;

TL_JIT(scale_add, tl::Ptr x, tl::Ptr y, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::load(x + offs, m) * 2.0f + tl::load(y + offs, m), m);
}

Tensor fn(const Tensor& x, const Tensor& y) {
  Tensor out = empty_like(x);
  const int64_t n = x.numel();
  scale_add[{tl::cdiv(n, 256)}](x, y, out, n, tl::meta("BLOCK", 256));
  return out;
}

int main() {
  const Tensor x = randn({1000}), y = randn({1000});
  const Tensor want = x * 2 + y;
  const bool eager = allclose(fn(x, y), want);
  auto compiled = compile(fn, {.fullgraph = true});
  const bool graph = allclose(compiled(x, y), want);
  std::printf("consumer: tessera %s, kernel %s, compiled %s\n", version(), eager ? "ok" : "WRONG",
              graph ? "ok" : "WRONG");
  if (!(eager && graph)) return 1;
  std::printf("consumer: OK\n");
  return 0;
}
