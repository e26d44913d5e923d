#include "ops/pointwise.h"

#include <atomic>
#include <vector>

namespace tessera::ops_detail {
namespace {

thread_local bool t_through_tiles = false;  // ScopedThroughTiles

void check_allowed(const PointwiseDesc& d, DType compute) {
  if ((d.allowed & dtype_bit(compute)) == 0) detail::throw_unsupported_dtype(d.name, compute);
}

SymDimVector broadcast_all(const PointwiseDesc& d, ArrayRef<Tensor> inputs) {
  SymDimVector shape(inputs[0].sizes());
  for (size_t i = 1; i < inputs.size(); ++i)
    shape = broadcast_shapes(shape, inputs[i].sizes(), d.name);
  return shape;
}

void check_devices(const PointwiseDesc& d, ArrayRef<Tensor> inputs, const Tensor* out) {
  std::optional<Device> dev;
  auto visit = [&](const Tensor& t) {
    if (t.dim() == 0 && t.device().is_cpu()) return;  // CPU scalars join any device
    if (!dev) dev = t.device();
    TS_CHECK(t.device() == *dev, DeviceError)
        << "[" << d.name << "] expected all tensors to be on the same device, but found at least "
        << "two devices, " << *dev << " and " << t.device();
  };
  for (const auto& t : inputs) visit(t);
  if (out) visit(*out);
}

// Runs the loop into `out` (whose dtype is the op's result dtype) when there is data.
void run_into(const PointwiseDesc& d, const Tensor& out, ArrayRef<Tensor> inputs, DType compute,
              const void* extra) {
  if (!out.has_data()) return;
  for (const auto& t : inputs) {
    TS_CHECK(t.has_data(), ValueError) << "[" << d.name << "] mixes tensors with and without data";
  }
  if (!out.device().is_cpu() || t_through_tiles) {
    run_on_device(d, out, inputs, compute, extra);
    return;
  }
  SmallVector<Tensor, 4> conv;
  for (const auto& t : inputs) conv.push_back(broadcast_to(cpu_to_dtype(t, compute), out.sizes()));
  if (conv.size() == 1 && out.dtype() == compute && conv[0].dtype() == compute &&
      out.is_contiguous() && conv[0].is_contiguous()) {
    const void* x = conv[0].impl()->data();
    void* o = out.impl()->data();
    const int64_t n = out.impl()->int_numel();
    if (compute == DType::Float32 &&
        fast_unary_f32(d.op, static_cast<const float*>(x), static_cast<float*>(o), n))
      return;
    if ((compute == DType::Float16 || compute == DType::BFloat16) &&
        fast_unary_narrow(d.op, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(o), n,
                          compute == DType::BFloat16))
      return;
  }
  // Narrow-float arithmetic: add and sub only without alpha (extra: the alpha Scalar).
  const bool plain = !(d.op == PwOp::Add || d.op == PwOp::Sub) ||
                     (extra && *static_cast<const Scalar*>(extra) == Scalar(1));
  if (conv.size() == 2 && (compute == DType::Float16 || compute == DType::BFloat16) && plain &&
      out.dtype() == compute && conv[0].dtype() == compute && conv[1].dtype() == compute &&
      out.is_contiguous() && conv[0].is_contiguous() && conv[1].is_contiguous() &&
      fast_arith_narrow(d.op, static_cast<const uint16_t*>(conv[0].impl()->data()),
                        static_cast<const uint16_t*>(conv[1].impl()->data()),
                        static_cast<uint16_t*>(out.impl()->data()), out.impl()->int_numel(),
                        compute == DType::BFloat16))
    return;
  if (conv.size() == 2 && has_fast_binary(d.op) && out.dtype() == compute &&
      conv[0].dtype() == compute && conv[1].dtype() == compute && out.is_contiguous() &&
      conv[0].is_contiguous() && conv[1].is_contiguous()) {
    const void *a = conv[0].impl()->data(), *b = conv[1].impl()->data();
    void* o = out.impl()->data();
    const int64_t n = out.impl()->int_numel();
    if (compute == DType::Float32 &&
        fast_binary_f32(d.op, static_cast<const float*>(a), static_cast<const float*>(b),
                        static_cast<float*>(o), n))
      return;
    if ((compute == DType::Float16 || compute == DType::BFloat16) &&
        fast_binary_narrow(d.op, static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b),
                           static_cast<uint16_t*>(o), n, compute == DType::BFloat16))
      return;
  }
  d.run(out, conv, compute, extra);
}

}  // namespace

DType compute_dtype(const PointwiseDesc& d, DType promoted) {
  DType c = promoted;
  if (d.rule == ResultRule::ToFloat && !is_floating_point(c)) c = default_float_dtype();
  check_allowed(d, c);
  return c;
}

DType result_dtype(const PointwiseDesc& d, DType compute) {
  return (d.rule == ResultRule::BoolOut || d.rule == ResultRule::LogicalOut) ? DType::Bool
                                                                             : compute;
}

Tensor pointwise(const PointwiseDesc& d, ArrayRef<Tensor> inputs, DType promoted,
                 const void* extra) {
  check_devices(d, inputs, nullptr);
  const DType compute = compute_dtype(d, promoted);
  const SymDimVector shape = broadcast_all(d, inputs);
  // The output follows the first input with a device and data (not a CPU scalar).
  const Tensor* like = &inputs[0];
  for (const auto& t : inputs) {
    if (!(t.dim() == 0 && t.device().is_cpu())) {
      like = &t;
      break;
    }
  }
  for (const auto& t : inputs) {
    if (!t.has_data()) like = &t;  // meta / fake inputs make a meta / fake output
  }
  Tensor out = new_output(*like, shape, result_dtype(d, compute));
  run_into(d, out, inputs, compute, extra);
  return out;
}

Tensor& pointwise_out(const PointwiseDesc& d, ArrayRef<Tensor> inputs, DType promoted, Tensor& out,
                      const void* extra) {
  check_devices(d, inputs, &out);
  const DType compute = compute_dtype(d, promoted);
  const DType result = result_dtype(d, compute);
  const SymDimVector shape = broadcast_all(d, inputs);
  return write_out(out, shape, result, d.name, inputs,
                   [&](const Tensor& target) { run_into(d, target, inputs, compute, extra); });
}

void pointwise_inplace(const PointwiseDesc& d, Tensor& self, ArrayRef<Tensor> inputs,
                       DType promoted, const void* extra) {
  TS_INTERNAL_ASSERT(inputs[0].is_same(self)) << "in-place op whose first input is not self";
  const SymDimVector shape = broadcast_all(d, inputs);
  TS_CHECK(SymIntArrayRef(shape).equals(self.sizes()), ShapeError)
      << "[" << d.name << "_] output with shape " << self.sizes()
      << " doesn't match the broadcast shape " << SymIntArrayRef(shape);
  const DType result = result_dtype(d, compute_dtype(d, promoted));
  TS_CHECK(can_cast(result, self.dtype()), DTypeError)
      << "[" << d.name << "_] result type " << dtype_name(result)
      << " can't be cast to the desired output type " << dtype_name(self.dtype());
  pointwise_out(d, inputs, promoted, self, extra);
}

namespace {
// The device runners the tile lowering registers at load time (one slot per kind of op).
std::atomic<DevicePointwiseRunner> g_pointwise_runner{nullptr};
std::atomic<DeviceReduceRunner> g_reduce_runner{nullptr};
std::atomic<DeviceRowRunner> g_row_runner{nullptr};
std::atomic<DeviceNormRunner> g_norm_runner{nullptr};
std::atomic<DeviceIndexRunner> g_index_runner{nullptr};
std::atomic<DeviceMatmulRunner> g_matmul_runner{nullptr};

thread_local uint64_t t_runner_calls = 0;

template <class Fn>
Fn registered(const std::atomic<Fn>& slot, bool lowered, const char* name, Device d) {
  ++t_runner_calls;
  const Fn run = slot.load(std::memory_order_acquire);
  TS_CHECK(run && lowered, NotImplementedError)
      << "[" << name << "] is not available on " << d << " yet";
  return run;
}
}  // namespace

uint64_t device_runner_calls() {
  return t_runner_calls;
}

void set_device_pointwise_runner(DevicePointwiseRunner run) {
  g_pointwise_runner.store(run, std::memory_order_release);
}
void set_device_reduce_runner(DeviceReduceRunner run) {
  g_reduce_runner.store(run, std::memory_order_release);
}
void set_device_row_runner(DeviceRowRunner run) {
  g_row_runner.store(run, std::memory_order_release);
}
void set_device_norm_runner(DeviceNormRunner run) {
  g_norm_runner.store(run, std::memory_order_release);
}
void set_device_matmul_runner(DeviceMatmulRunner run) {
  g_matmul_runner.store(run, std::memory_order_release);
}
void set_device_index_runner(DeviceIndexRunner run) {
  g_index_runner.store(run, std::memory_order_release);
}

void run_on_device(const PointwiseDesc& d, const Tensor& out, ArrayRef<Tensor> inputs,
                   DType compute, const void* extra) {
  const auto run = registered(g_pointwise_runner, d.op != PwOp::None, d.name, out.device());
  SmallVector<Tensor, 4> views;
  for (const auto& t : inputs) {
    // (a CPU scalar stays one: the kernel takes its value as a parameter)
    views.push_back(t.dim() == 0 && t.device().is_cpu() ? t : broadcast_to(t, out.sizes()));
  }
  run(d, out, views, compute, extra);
}
void run_device_reduce(ReduceOp op, const Tensor& rows, int64_t kept, const Tensor& out,
                       const Tensor* indices, const char* name, double correction) {
  registered(g_reduce_runner, true, name, out.device())(op, rows, kept, out, indices, correction,
                                                        name);
}
void run_device_row(RowOp op, const Tensor& in_rows, const Tensor& out_rows, const char* name) {
  registered(g_row_runner, true, name, out_rows.device())(op, in_rows, out_rows, name);
}
void run_device_matmul(const Tensor& A, const Tensor& B, const Tensor& C, int64_t batches,
                       int64_t M, int64_t N, int64_t K) {
  registered(g_matmul_runner, true, "matmul", C.device())(A, B, C, batches, M, N, K);
}
void run_device_index(IndexOp op, const Tensor& src, const Tensor& index, const Tensor& out,
                      IndexGeometry g, const Scalar& alpha, const char* name) {
  registered(g_index_runner, true, name, out.device())(op, src, index, out, g, alpha, name);
}
void run_device_norm(bool rms, const Tensor& x, int64_t normalized, const Tensor* weight,
                     const Tensor* bias, double eps, const Tensor& out, const char* name) {
  registered(g_norm_runner, true, name, out.device())(rms, x, normalized, weight, bias, eps, out,
                                                      name);
}

bool through_tiles() {
  return t_through_tiles;
}

ScopedThroughTiles::ScopedThroughTiles() : saved_(t_through_tiles) {
  t_through_tiles = true;
}
ScopedThroughTiles::~ScopedThroughTiles() {
  t_through_tiles = saved_;
}

Tensor scalar_tensor(const Scalar& s, DType dtype) {
  Tensor t = detail::make_empty({}, dtype, kCPU);
  cpu_fill(t, s);
  return t;
}

}  // namespace tessera::ops_detail
