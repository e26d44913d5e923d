// Triton's tutorial 05 (layer norm), ported as written: the fused forward (examples/layer_norm.h),
// and the backward in two kernels. The first computes dx row by row and accumulates each row's
// partial dw and db into one of GROUP_SIZE_M buffers, the buffer guarded by a spin lock
// (tl::atomic_cas) with a count beside it so its first writer stores instead of adding; the second
// sums the GROUP_SIZE_M buffers into dw and db. Wrapped as a triton_op with register_autograd (the
// tutorial's torch.autograd.Function), trained through tessera's autograd, and checked against a
// float64 reference of every gradient on fresh inputs. Runs on the GPU with `--cuda`; `--bench`
// times forward and forward + backward beside the eager `layer_norm` (the tutorial's benchmark
// against torch's layer norm; tutorial_bench.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <tuple>

#include <tessera/library.h>

#include "layer_norm.h"
#include "tutorial_bench.h"

namespace tl = tessera::tl;
namespace library = tessera::library;
using tessera::Tensor;

TL_JIT(layer_norm_bwd_dx_fused, tl::Ptr DX, tl::Ptr DY, tl::Ptr DW, tl::Ptr DB, tl::Ptr X,
       tl::Ptr W, tl::Ptr Mean, tl::Ptr Rstd, tl::Ptr Lock, tl::Int stride, tl::Int N,
       tl::Const GROUP_SIZE_M, tl::Const BLOCK_SIZE_N) {
  // Map the program id to the elements of X, DX, and DY it should compute.
  auto row = tl::program_id(0);
  auto cols = tl::arange(0, BLOCK_SIZE_N);
  auto mask = cols < N;
  auto x_row = X + row * stride;
  auto dy_row = DY + row * stride;
  auto dx_row = DX + row * stride;
  // Offset locks and weights/biases gradient pointer for parallel reduction.
  auto lock_id = row % GROUP_SIZE_M;
  auto lock = Lock + lock_id;
  auto count_ptr = lock + GROUP_SIZE_M;
  auto dw_ptrs = DW + lock_id * N + cols;
  auto db_ptrs = DB + lock_id * N + cols;
  // Load data to SRAM.
  auto x = tl::load(x_row + cols, mask, 0).to(tl::float32);
  auto dy = tl::load(dy_row + cols, mask, 0).to(tl::float32);
  auto w = tl::load(W + cols, mask).to(tl::float32);
  auto mean = tl::load(Mean + row);
  auto rstd = tl::load(Rstd + row);
  // Compute dx.
  auto xhat = (x - mean) * rstd;
  auto wdy = w * dy;
  xhat = tl::where(mask, xhat, 0.0);
  wdy = tl::where(mask, wdy, 0.0);
  auto c1 = tl::sum(xhat * wdy, 0) / N;
  auto c2 = tl::sum(wdy, 0) / N;
  auto dx = (wdy - (xhat * c1 + c2)) * rstd;
  // Write dx.
  tl::store(dx_row + cols, dx, mask);
  // Accumulate partial sums for dw/db.
  tl::Var partial_dw = (dy * xhat).to(w.dtype());
  tl::Var partial_db = dy.to(w.dtype());
  tl::while_([&] { return tl::atomic_cas(lock, 0, 1) == 1; }, [&] {});
  auto count = tl::load(count_ptr);
  // First store doesn't accumulate.
  tl::if_(
      count == 0, [&] { (void)tl::atomic_xchg(count_ptr, 1); },
      [&] {
        partial_dw += tl::load(dw_ptrs, mask);
        partial_db += tl::load(db_ptrs, mask);
      });
  tl::store(dw_ptrs, partial_dw, mask);
  tl::store(db_ptrs, partial_db, mask);
  // Release the lock.
  (void)tl::atomic_xchg(lock, 0);
}

TL_JIT(layer_norm_bwd_dwdb, tl::Ptr DW, tl::Ptr DB, tl::Ptr FINAL_DW, tl::Ptr FINAL_DB, tl::Int M,
       tl::Int N, tl::Const BLOCK_SIZE_M, tl::Const BLOCK_SIZE_N) {
  // Map the program id to the elements of DW and DB it should compute.
  auto pid = tl::program_id(0);
  auto cols = pid * BLOCK_SIZE_N + tl::arange(0, BLOCK_SIZE_N);
  tl::Var dw = tl::zeros({BLOCK_SIZE_M, BLOCK_SIZE_N}, tl::float32);
  tl::Var db = tl::zeros({BLOCK_SIZE_M, BLOCK_SIZE_N}, tl::float32);
  // Iterate through the rows of DW and DB to sum the partial sums.
  tl::range(0, M, BLOCK_SIZE_M, [&](tl::Tile i) {
    auto rows = i + tl::arange(0, BLOCK_SIZE_M);
    auto mask = (rows[{tl::_, tl::None}] < M) & (cols[{tl::None, tl::_}] < N);
    auto offs = rows[{tl::_, tl::None}] * N + cols[{tl::None, tl::_}];
    dw += tl::load(DW + offs, mask, 0.0);
    db += tl::load(DB + offs, mask, 0.0);
  });
  // Write the final sum to the output.
  auto sum_dw = tl::sum(dw, 0);
  auto sum_db = tl::sum(db, 0);
  tl::store(FINAL_DW + cols, sum_dw, cols < N);
  tl::store(FINAL_DB + cols, sum_db, cols < N);
}

namespace {

int64_t next_power_of_2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// The tutorial's block size: the whole row in one block, at most 64 KB of it.
int64_t block_size_for(const Tensor& x) {
  const int64_t N = x.size(-1).guard_int();
  const int64_t max_fused = 65536 / static_cast<int64_t>(tessera::itemsize(x.dtype()));
  const int64_t block = std::min(max_fused, next_power_of_2(N));
  if (N > block) throw std::runtime_error("This layer norm doesn't support feature dim >= 64KB.");
  return block;
}

// forward: y, and the mean and 1/std the backward reads.
std::tuple<Tensor, Tensor, Tensor> layer_norm_forward(const Tensor& x, const Tensor& weight,
                                                      const Tensor& bias, double eps) {
  const int64_t M = x.size(0).guard_int();
  Tensor y = tessera::empty_like(x);
  auto opts = tessera::TensorOptions().dtype(tessera::DType::Float32).device(x.device());
  Tensor mean = tessera::empty({M}, opts), rstd = tessera::empty({M}, opts);
  layer_norm_example::layer_norm_into(x, weight, bias, eps, y, mean, rstd);
  return {y, mean, rstd};
}

// backward: dx, dw, db from dy and what the forward saved.
std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& dy, const Tensor& x,
                                                       const Tensor& w, const Tensor& m,
                                                       const Tensor& v) {
  const int64_t M = x.size(0).guard_int(), N = x.size(1).guard_int();
  // Heuristics for the amount of parallel reduction stream for DW/DB.
  int64_t GROUP_SIZE_M = 64;
  if (N <= 8192) GROUP_SIZE_M = 96;
  if (N <= 4096) GROUP_SIZE_M = 128;
  if (N <= 1024) GROUP_SIZE_M = 256;
  // Allocate output.
  auto on = tessera::TensorOptions().device(x.device());
  Tensor locks = tessera::zeros({2 * GROUP_SIZE_M}, on.dtype(tessera::DType::Int32));
  Tensor _dw = tessera::zeros({GROUP_SIZE_M, N}, on.dtype(x.dtype()));
  Tensor _db = tessera::zeros({GROUP_SIZE_M, N}, on.dtype(x.dtype()));
  Tensor dw = tessera::empty({N}, on.dtype(w.dtype())),
         db = tessera::empty({N}, on.dtype(w.dtype()));
  Tensor dx = tessera::empty_like(dy);
  // Enqueue kernel that uses forward pass heuristics to compute DX and accumulate partial sums of
  // DW and DB.
  layer_norm_bwd_dx_fused[{M}](dx, dy, _dw, _db, x, w, m, v, locks, x.stride(0), N,
                               tl::meta("BLOCK_SIZE_N", block_size_for(x)),
                               tl::meta("GROUP_SIZE_M", GROUP_SIZE_M));
  // Accumulate partial sums in separate kernel.
  layer_norm_bwd_dwdb[{tl::cdiv(N, 128)}](_dw, _db, dw, db, std::min(GROUP_SIZE_M, M), N,
                                          tl::meta("BLOCK_SIZE_M", 32),
                                          tl::meta("BLOCK_SIZE_N", 128));
  return {dx, dw, db};
}

// The float64 reference of y and of every gradient.
struct Reference {
  Tensor y, dx, dw, db;
};
Reference reference(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy,
                    double eps) {
  const auto f64 = tessera::DType::Float64;
  Tensor x64 = x.cpu().to(f64), w64 = w.cpu().to(f64), b64 = b.cpu().to(f64),
         dy64 = dy.cpu().to(f64);
  const double N = static_cast<double>(x.size(1).guard_int());
  Tensor mean = x64.mean({1}, true);
  Tensor xc = x64 - mean;
  Tensor rstd = ((xc * xc).mean({1}, true) + eps).rsqrt();
  Tensor xhat = xc * rstd;
  Tensor wdy = dy64 * w64;
  Tensor c1 = (xhat * wdy).sum({1}, true) / N, c2 = wdy.sum({1}, true) / N;
  return {xhat * w64 + b64, (wdy - (xhat * c1 + c2)) * rstd, (dy64 * xhat).sum({0}), dy64.sum({0})};
}

}  // namespace

// The tutorial's LayerNorm autograd function: a triton_op and its derivative.
auto make_layer_norm() {
  auto layer_norm =
      library::triton_op("tutorial05::layer_norm", layer_norm_forward,
                         {.mutates_args = {}, .arg_names = {"x", "weight", "bias", "eps"}});
  layer_norm.register_autograd(
      [](tessera::autograd::AutogradContext& ctx, const std::vector<Tensor>& grads) {
        auto [dx, dw, db] = layer_norm_backward(grads.at(0).contiguous(), ctx.saved(0),
                                                ctx.saved(1), ctx.saved(2), ctx.saved(3));
        return std::vector<tessera::IValue>{dx, dw, db, tessera::IValue()};
      },
      [](tessera::autograd::AutogradContext& ctx, const tessera::Stack& in,
         const tessera::Stack& out) {
        ctx.save_for_backward(
            {in[0].to_tensor(), in[1].to_tensor(), out[1].to_tensor(), out[2].to_tensor()});
      });
  return layer_norm;
}

// The tutorial's benchmark: M = 4096 rows, forward and forward + backward (the gradients of x, w
// and b from a given dy), beside the eager layer_norm with autograd.
template <class Op>
void bench(const tutorial_bench::Args& args, const Op& layer_norm) {
  const tessera::Device dev = args.device();
  const double eps = 1e-5;
  tutorial_bench::header();
  for (const tessera::DType dt : {tessera::float32, tessera::float16}) {
    for (const int64_t N : {1024, 4096}) {
      const int64_t M = 4096;
      auto opt = tessera::TensorOptions().dtype(dt).device(dev);
      Tensor x = (tessera::randn({M, N}) * 2 + 1).to(opt), w = tessera::rand({N}).to(opt);
      Tensor b = tessera::randn({N}).to(opt), dy = (tessera::randn({M, N}) * 0.1).to(opt);
      const std::string name = "layer norm " + std::to_string(M) + "x" + std::to_string(N) + " " +
                               tessera::dtype_name(dt);
      const double bytes = 2.0 * M * N * static_cast<double>(tessera::itemsize(dt));
      tutorial_bench::row(
          name + " forward", args,
          [&] {
            tessera::NoGradGuard no_grad;
            return std::get<0>(layer_norm(x, w, b, eps));
          },
          [&] {
            tessera::NoGradGuard no_grad;
            return tessera::layer_norm(x, {N}, w, b, eps);
          },
          bytes, "GB/s");
      // Forward and backward: x, w, b require grad; the gradients come from y.backward(dy).
      Tensor xg = x.detach().requires_grad_(), wg = w.detach().requires_grad_(),
             bg = b.detach().requires_grad_();
      auto step = [&](auto&& forward) {
        xg.mutable_grad() = Tensor(), wg.mutable_grad() = Tensor(), bg.mutable_grad() = Tensor();
        Tensor y = forward();
        y.backward(dy);
        return xg.grad();
      };
      // Bytes: the forward reads x and writes y; the backward reads x, dy and writes dx.
      tutorial_bench::row(
          name + " forward + backward", args,
          [&] { return step([&] { return std::get<0>(layer_norm(xg, wg, bg, eps)); }); },
          [&] { return step([&] { return tessera::layer_norm(xg, {N}, wg, bg, eps); }); },
          bytes * 2.5, "GB/s");
    }
  }
}

int main(int argc, char** argv) {
  const tutorial_bench::Args args = tutorial_bench::parse(argc, argv);
  auto layer_norm = make_layer_norm();
  if (args.bench) return bench(args, layer_norm), 0;
  const tessera::Device dev = args.device();

  bool ok = true;
  const double eps = 1e-5;
  for (auto [M, N] : {std::pair<int64_t, int64_t>{1151, 1024}, {300, 3000}, {7, 33}}) {
    auto on = tessera::TensorOptions().device(dev);
    Tensor x = (tessera::randn({M, N}) * 2 + 1).to(dev).requires_grad_();
    Tensor w = tessera::rand({N}).to(dev).requires_grad_();
    Tensor b = tessera::randn({N}).to(dev).requires_grad_();
    Tensor dy = (tessera::randn({M, N}) * 0.1).to(dev);
    (void)on;
    Tensor y = std::get<0>(layer_norm(x, w, b, eps));
    y.backward(dy);
    const Reference ref = reference(x.detach(), w.detach(), b.detach(), dy, eps);
    auto close = [](const Tensor& got, const Tensor& want, double tol) {
      Tensor g = got.cpu().to(tessera::DType::Float64);
      const double scale = want.abs().max().item<double>() + 1e-30;
      return ((g - want).abs().max().item<double>() <= tol * scale);
    };
    const bool good = close(y, ref.y, 1e-5) && close(x.grad(), ref.dx, 1e-4) &&
                      close(w.grad(), ref.dw, 1e-4) && close(b.grad(), ref.db, 1e-4);
    std::cout << "layer norm " << M << "x" << N << " on " << dev.str() << ": y, dx, dw, db "
              << (good ? "match" : "MISMATCH") << " the float64 reference\n";
    ok = ok && good;
  }
  std::cout << (ok ? "tutorial_05_layer_norm: OK" : "tutorial_05_layer_norm: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
