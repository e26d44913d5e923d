// The reference interpreter as a backend: no source, no build; each launch runs the IR element by
// element on the thread pool, with the checked mode's bounds and overflow checks under
// TESSERA_DEBUG.
#include "backend/backend.h"
#include "backend/interp/interpret.h"
#include "runtime/thread_pool.h"
#include "tessera/detail/hash.h"
#include "tessera/env.h"

namespace tessera::backend::interp {
namespace {

class InterpBackend final : public Backend {
 public:
  const char* name() const override { return "interp"; }

  const std::string& target_key() const override {
    static const std::string key = "interp";
    return key;
  }

  bool evaluates_asserts(bool) const override { return true; }

  void generate(std::shared_ptr<const ir::Function> f, bool checked, Kernel& out) const override {
    // A user's compiled function (tl::extern_elementwise) has nothing the interpreter can run.
    ir::walk(f->body, [&](const ir::Op* op) {
      if (op->kind != ir::OpKind::Extern) return;
      const ir::ExternCall e = ir::unpack_extern(op->text);
      throw CompileError("kernel '" + f->name + "': tl::extern_elementwise calls '" + e.symbol +
                             "' of library '" + e.library +
                             "', compiled code that the interpreter (TESSERA_INTERPRET=1) cannot "
                             "run; run the kernel compiled",
                         op->loc);
    });
    out.name = f->name;
    out.checked = checked;
    out.code_key = "interp:" + sha256_hex(ir::print(*f, /*attributes=*/false));
    out.function = std::move(f);
  }

  void build(const std::vector<Kernel*>& kernels) const override {
    for (Kernel* k : kernels) k->built = true;  // nothing to compile
  }

  void launch(const Kernel& k, const GridSize& g, ArrayRef<Arg> args) const override {
    trt::Arg slots[64];
    for (size_t i = 0; i < args.size(); ++i) {
      switch (args[i].kind) {
        case ir::ParamKind::Pointer:
          slots[i].p = args[i].ptr;
          break;
        case ir::ParamKind::Float:
          slots[i].f = args[i].f;
          break;
        default:
          slots[i].i = args[i].i;
          break;
      }
    }
    CheckCounters counters;
    InterpretOptions o;
    o.kernel = k.name;
    o.counters = &counters;
    if (k.checked) {
      o.check_overflow = true;
      o.bounds = tensor_bounds(args);
    }
    const ir::Function& f = *k.function;
    if (g.total == 1) {
      interpret(f, g.grid, 0, 1, slots, o);
    } else {
      runtime::parallel_for(0, g.total, 1,
                            [&](int64_t b, int64_t e) { interpret(f, g.grid, b, e, slots, o); });
    }
    finish_checks(k.name, counters);
  }
};

}  // namespace
}  // namespace tessera::backend::interp

namespace tessera::backend {
const Backend& interp_backend() {
  static const interp::InterpBackend b;
  return b;
}
}  // namespace tessera::backend
