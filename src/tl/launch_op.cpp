// The kernel launch operator (launch_op.h).
#include "tl/launch_op.h"

#include "tessera/autograd.h"
#include "tessera/detail/boxing.h"
#include "tessera/detail/local_state.h"

namespace tessera::tl {
namespace {

// One launch being dispatched on this thread.
struct Frame {
  const Launcher* launcher;
  ArrayRef<KernelArg> args;
  LaunchRecord record;
};

std::vector<Frame>& frames() {
  thread_local std::vector<Frame> f;
  return f;
}

// The frame whose kernel is running on this thread (null: a direct launch records nothing). Read
// on every launch: initial-exec TLS is one fs-relative load, not a __tls_get_addr call.
thread_local Frame* t_running __attribute__((tls_model("initial-exec"))) = nullptr;
Frame*& running() {
  return t_running;
}

Frame& frame_of(const Stack& stack, const char* what) {
  TS_CHECK(stack.size() >= 2, InternalError) << "[" << what << "] no kernel_launch arguments";
  const int64_t i = stack[stack.size() - 2].to_int();
  auto& f = frames();
  TS_CHECK(i >= 0 && static_cast<size_t>(i) < f.size(), ValueError)
      << "[tessera::kernel_launch] launch " << i
      << " is not being dispatched on this thread (the operator is called by kernel launches)";
  return f[static_cast<size_t>(i)];
}

// The frame's arguments with the tensors the call carries, in order.
std::vector<KernelArg> with_tensors(const Frame& fr, ArrayRef<Tensor> tensors) {
  std::vector<KernelArg> args(fr.args.begin(), fr.args.end());
  size_t t = 0;
  for (auto& a : args) {
    if (a.kind != KernelArg::Kind::Tensor) continue;
    TS_CHECK(t < tensors.size(), ValueError)
        << "[tessera::kernel_launch] fewer tensors than the launch's tensor arguments";
    a.tensor = &tensors[t++];
  }
  return args;
}

// The operator's kernel on every device: the launch itself, with the call's tensors.
void kernel_launch_impl(int64_t launch, ArrayRef<Tensor> tensors) {
  Frame& fr = frames().at(static_cast<size_t>(launch));
  const std::vector<KernelArg> args = with_tensors(fr, tensors);
  Frame* saved = running();
  running() = &fr;
  struct Restore {
    Frame* s;
    ~Restore() { running() = s; }
  } restore{saved};
  const ArrayRef<KernelArg> a(args.data(), args.size());
  if (const auto* target = fr.launcher->target()) {
    target->launch(*fr.launcher, a);
  } else {
    fr.launcher->run_kernel(a);
  }
}

const OperatorHandle& define() {
  static const OperatorHandle op = [] {
    Library lib("tessera");
    OperatorHandle h = lib.def("kernel_launch(int launch, Tensor(a!)[] tensors) -> ()");
    lib.impl_all("kernel_launch", kernel_launch_impl);
    // A launch writes through pointers; its gradients are the user's (triton_op with
    // register_autograd), never derived from the launch.
    autograd::register_nondifferentiable("tessera::kernel_launch");
    return h;
  }();
  return op;
}

}  // namespace

const OperatorHandle& kernel_launch_op() {
  return define();
}

bool is_kernel_launch(const OperatorHandle& op) {
  return op == define();
}

LaunchView launch_of(const Stack& stack) {
  const Frame& fr = frame_of(stack, "launch_of");
  LaunchView v;
  v.launcher = fr.launcher;
  v.tensors = stack.back().to_tensor_list();
  v.args = with_tensors(fr, ArrayRef<Tensor>(v.tensors.data(), v.tensors.size()));
  return v;
}

LaunchRecord launch_record(const Stack& stack) {
  return frame_of(stack, "launch_record").record;
}

namespace detail {

bool launch_needs_dispatch(ArrayRef<KernelArg> args) {
  const auto& ls = tessera::detail::local_state();
  if (ls.function_depth != 0 || ls.dispatch_depth != 0) return true;
  for (const auto& a : args) {
    if (a.kind == KernelArg::Kind::Tensor && a.tensor->defined() &&
        (a.tensor->impl()->flags() & kTensorWrapper))
      return true;
  }
  return false;
}

void dispatch_launch(const Launcher& launcher, ArrayRef<KernelArg> args) {
  auto& f = frames();
  const size_t index = f.size();
  f.push_back(Frame{&launcher, args, {}});
  struct Pop {
    ~Pop() { frames().pop_back(); }
  } pop;
  std::vector<Tensor> tensors;
  for (const auto& a : args) {
    if (a.kind == KernelArg::Kind::Tensor) tensors.push_back(*a.tensor);
  }
  Stack stack;
  stack.emplace_back(static_cast<int64_t>(index));
  stack.emplace_back(std::move(tensors));
  kernel_launch_op().call(stack);
}

bool recording() {
  return running() != nullptr;
}

void record_run(const std::string& kernel, const std::shared_ptr<const ir::Function>& f,
                const std::vector<ir::ParamValue>& params, const int64_t grid[3]) {
  Frame* fr = running();
  if (!fr) return;
  fr->record.kernel = kernel;
  fr->record.function = f;
  fr->record.params = params;
  for (int d = 0; d < 3; ++d) fr->record.grid[d] = grid[d];
}

}  // namespace detail
}  // namespace tessera::tl
