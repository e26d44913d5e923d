// Derivative formulas of the built-in operators (PyTorch's derivatives.yaml, written as C++
// against the same registration API user operators get). Each formula is written with tessera
// operators, so it is itself differentiable (create_graph) and runs on any device. Composite
// operators (linear, reshape, stack, ...) need none: they decompose before autograd sees them.
// tests/autograd checks that every non-composite operator has a formula or is marked
// non-differentiable, and gradchecks each formula.
#include <cmath>
#include <numbers>

#include "autograd/internal.h"
#include "ops/op_utils.h"
#include "ops/pointwise.h"
#include "tessera/ops.h"

namespace tessera::autograd {
namespace {

using Grads = std::vector<Tensor>;
using R = std::vector<IValue>;
using Ctx = AutogradContext;

// ---- helpers ------------------------------------------------------------------------------------

std::string key(char kind, size_t i) {
  return std::string(1, kind) + std::to_string(i);
}

/** A setup that saves tensor arguments `args` and results `results`, and records every argument's
 * shape ("s<i>") and every non-tensor argument ("a<i>") for the backward. */
SetupContextFn keep(std::vector<int> args = {}, std::vector<int> results = {}) {
  return [args = std::move(args), results = std::move(results)](Ctx& c, const Stack& in,
                                                                const Stack& out) {
    std::vector<Tensor> ts;
    for (int a : args)
      ts.push_back(in[static_cast<size_t>(a)].is_tensor() ? in[static_cast<size_t>(a)].to_tensor()
                                                          : Tensor());
    for (int r : results) ts.push_back(out[static_cast<size_t>(r)].to_tensor());
    if (!ts.empty()) c.save_for_backward(std::move(ts));
    for (size_t i = 0; i < in.size(); ++i) {
      const IValue& v = in[i];
      if (v.is_tensor()) {
        if (v.to_tensor().defined()) c.set(key('s', i), IValue(v.to_tensor().sizes().vec()));
      } else if (v.is_tensor_list()) {
        std::vector<SymInt> along;  // each tensor's full shape, flattened with its rank first
        for (const auto& t : v.to_tensor_list()) {
          along.push_back(t.dim());
          for (const auto& s : t.sizes()) along.push_back(s);
        }
        c.set(key('s', i), IValue(std::move(along)));
      } else {
        c.set(key('a', i), v);
      }
    }
  };
}

std::vector<SymInt> shape(const Ctx& c, size_t i) {
  return c.get(key('s', i)).to_symint_list();
}
const IValue& arg(const Ctx& c, size_t i) {
  return c.get(key('a', i));
}
Scalar scalar_arg(const Ctx& c, size_t i) {
  return arg(c, i).to_scalar();
}

/** Sums a broadcast gradient back to `target`'s shape. */
Tensor sum_to(const Tensor& g, SymIntArrayRef target) {
  if (!g.defined() || same_sizes(g.sizes(), target)) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(target.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (size_t d = 0; d < target.size(); ++d) {
    if (static_cast<bool>(target[d] == 1) &&
        !static_cast<bool>(g.sizes()[lead + static_cast<int64_t>(d)] == 1)) {
      dims.push_back(lead + static_cast<int64_t>(d));
    }
  }
  Tensor r = dims.empty() ? g : g.sum(dims, /*keepdim=*/true);
  return r.reshape(target);
}

/** -1, 0 or 1 by sign, in x's dtype. */
Tensor sign(const Tensor& x) {
  return (x > 0).to(x.dtype()) - (x < 0).to(x.dtype());
}

/** The reduced dims of a `dim`/`keepdim` reduction, normalized and sorted. */
std::vector<int64_t> reduced_dims(const IValue& dim, int64_t ndim) {
  std::vector<int64_t> dims;
  if (!dim.is_none()) {
    if (dim.is_int()) {
      dims.push_back(dim.to_int());
    } else {
      dims = dim.to_int_list();
    }
  }
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) dims.push_back(d);
  }
  for (auto& d : dims) d = detail::wrap_dim(d, std::max<int64_t>(ndim, 1), "backward");
  std::sort(dims.begin(), dims.end());
  return dims;
}

/** A reduction's gradient (or result) with the reduced dims put back as size 1. */
Tensor unsqueeze_reduced(Tensor g, const std::vector<int64_t>& dims, bool keepdim, int64_t ndim) {
  if (keepdim || ndim == 0) return g;
  for (int64_t d : dims) g = g.unsqueeze(d);
  return g;
}

/** Gradient of an all-elements-equal-to-the-extreme reduction: split evenly among the ties. */
Tensor extreme_grad(const Tensor& g, const Tensor& x, const Tensor& y,
                    const std::vector<int64_t>& dims, bool keepdim) {
  const Tensor yk = unsqueeze_reduced(y, dims, keepdim, x.dim());
  const Tensor gk = unsqueeze_reduced(g, dims, keepdim, x.dim());
  const Tensor mask = (x == yk).to(g.dtype());
  const Tensor count = dims.empty() ? mask.sum() : mask.sum(dims, true);
  return mask * (gk / count);
}

/** `g` placed at positions `index` along `dim` of a zero tensor of `shape` (the backward of
 * narrow, slice, select, index_select). Differentiable: it is an index_add. */
Tensor scatter_back(const Tensor& g, SymIntArrayRef shape, int64_t dim, const Tensor& index) {
  return index_add(zeros(shape, g.options()), dim, index, g);
}

Tensor range_index(int64_t start, int64_t n, int64_t step) {
  return arange(start, start + n * step, step, TensorOptions().dtype(DType::Int64));
}

double to_double(const IValue& v) {
  return v.is_int() ? static_cast<double>(v.to_int()) : v.to_double();
}

Tensor as_strided(const Tensor& t, const std::vector<SymInt>& sizes,
                  const std::vector<SymInt>& strides, SymInt offset) {
  static const OpRef op("aten::as_strided");
  return op(t, sizes, strides, offset).to_tensor();
}

void def(const char* op, SetupContextFn setup, BackwardFn backward) {
  set_formula(get_op(op), std::move(setup), std::move(backward));
}

// ---- matmul
// ---------------------------------------------------------------------------------------

R matmul_backward(Ctx& c, const Grads& g) {
  const Tensor a = c.saved(0), b = c.saved(1);
  const bool a1 = a.dim() == 1, b1 = b.dim() == 1;
  const Tensor A = a1 ? a.unsqueeze(0) : a;
  const Tensor B = b1 ? b.unsqueeze(-1) : b;
  Tensor G = g[0];
  if (b1) G = G.unsqueeze(-1);
  if (a1) G = G.unsqueeze(-2);
  Tensor ga, gb;
  if (c.needs_input_grad(0)) {
    ga = sum_to(matmul(G, B.transpose(-1, -2)), A.sizes());
    if (a1) ga = ga.squeeze(0);
  }
  if (c.needs_input_grad(1)) {
    gb = sum_to(matmul(A.transpose(-1, -2), G), B.sizes());
    if (b1) gb = gb.squeeze(-1);
  }
  return {ga, gb};
}

// ---- norms
// ----------------------------------------------------------------------------------------

/** Normalized dims of layer_norm / rms_norm: the last `k`. */
std::vector<int64_t> norm_dims(int64_t ndim, size_t k) {
  std::vector<int64_t> d;
  for (int64_t i = ndim - static_cast<int64_t>(k); i < ndim; ++i) d.push_back(i);
  return d;
}

/** The weight and bias gradients: sums over the non-normalized dims. */
Tensor affine_grad(const Tensor& t, int64_t ndim, size_t k) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < ndim - static_cast<int64_t>(k); ++i) d.push_back(i);
  return d.empty() ? t : t.sum(d);
}

/** Whether a norm's backward can take the CPU's one-pass kernel: real CPU tensors of one dtype,
 * and no graph of the backward itself (create_graph needs the differentiable formula; tracing
 * and the tile path record or run the operators below). */
bool one_pass_norm_backward(const Tensor& x, const Tensor& w, const Tensor& g) {
  const auto plain = [&](const Tensor& t) {
    return t.device().is_cpu() && !t.is_fake() && t.dtype() == x.dtype();
  };
  return !grad_enabled() && !ops_detail::through_tiles() && plain(x) && plain(g) &&
         (!w.defined() || plain(w)) && g.sizes().equals(x.sizes());
}

R layer_norm_backward(Ctx& c, const Grads& g) {
  const Tensor x = c.saved(0), w = c.saved(1);
  const auto k = arg(c, 1).to_int_list().size();
  const double eps = arg(c, 4).to_double();
  if (one_pass_norm_backward(x, w, g[0])) {
    auto r = ops_detail::norm_backward_cpu(
        false, x, static_cast<int64_t>(k), w.defined() ? &w : nullptr, g[0], eps,
        c.needs_input_grad(0), c.needs_input_grad(2), c.needs_input_grad(3));
    return {r.x, IValue(), r.w, r.b, IValue()};
  }
  const auto dims = norm_dims(x.dim(), k);
  const Tensor mu = x.mean(dims, true);
  const Tensor xc = x - mu;
  const Tensor rstd = rsqrt((xc * xc).mean(dims, true) + eps);
  const Tensor xhat = xc * rstd;
  const Tensor gxh = w.defined() ? g[0] * w : g[0];
  Tensor gx;
  if (c.needs_input_grad(0)) {
    gx = rstd * (gxh - gxh.mean(dims, true) - xhat * (gxh * xhat).mean(dims, true));
  }
  const Tensor gw =
      w.defined() && c.needs_input_grad(2) ? affine_grad(g[0] * xhat, x.dim(), k) : Tensor();
  const Tensor gb = c.needs_input_grad(3) ? affine_grad(g[0], x.dim(), k) : Tensor();
  return {gx, IValue(), gw, gb, IValue()};
}

R rms_norm_backward(Ctx& c, const Grads& g) {
  const Tensor x = c.saved(0), w = c.saved(1);
  const auto k = arg(c, 1).to_int_list().size();
  const IValue& e = arg(c, 3);
  const double eps = e.is_none() ? (x.dtype() == DType::Float64    ? 2.220446049250313e-16
                                    : x.dtype() == DType::Float16  ? 0.0009765625
                                    : x.dtype() == DType::BFloat16 ? 0.0078125
                                                                   : 1.1920928955078125e-07)
                                 : e.to_double();
  if (one_pass_norm_backward(x, w, g[0])) {
    auto r = ops_detail::norm_backward_cpu(true, x, static_cast<int64_t>(k),
                                           w.defined() ? &w : nullptr, g[0], eps,
                                           c.needs_input_grad(0), c.needs_input_grad(2), false);
    return {r.x, IValue(), r.w, IValue()};
  }
  const auto dims = norm_dims(x.dim(), k);
  const Tensor r = rsqrt((x * x).mean(dims, true) + eps);
  const Tensor xhat = x * r;
  const Tensor gxh = w.defined() ? g[0] * w : g[0];
  Tensor gx;
  if (c.needs_input_grad(0)) gx = r * (gxh - xhat * (gxh * xhat).mean(dims, true));
  const Tensor gw =
      w.defined() && c.needs_input_grad(2) ? affine_grad(g[0] * xhat, x.dim(), k) : Tensor();
  return {gx, IValue(), gw, IValue()};
}

/** `t / n` for a size `n`: a plain size as a scalar; a symbolic one (the backward of a dynamic
 * graph, traced) as a 0-dim float64 tensor, which divides like a scalar (a 0-dim operand does not
 * promote) without specializing the size. */
Tensor divide_by_size(const Tensor& t, const SymInt& n) {
  if (!n.is_symbolic()) return t / n.guard_int();
  return t / size_tensor(n, TensorOptions().dtype(DType::Float64).device(t.device()));
}

// ---- views
// ----------------------------------------------------------------------------------------

/** Python's slice bounds, normalized as the forward does. */
int64_t slice_start(const IValue& v, int64_t size) {
  int64_t s = v.is_none() ? 0 : v.to_symint().guard_int();
  if (s < 0) s += size;
  return std::clamp<int64_t>(s, 0, size);
}

R slice_backward(Ctx& c, const Grads& g) {
  const auto in = shape(c, 0);
  const int64_t dim =
      detail::wrap_dim(arg(c, 1).to_int(), static_cast<int64_t>(in.size()), "slice");
  const int64_t size = in[static_cast<size_t>(dim)].guard_int();
  const int64_t start = slice_start(arg(c, 2), size);
  const int64_t step = arg(c, 4).to_symint().guard_int();
  const int64_t n = g[0].sizes()[dim].guard_int();
  return {scatter_back(g[0], in, dim, range_index(start, n, step)), IValue(), IValue(), IValue(),
          IValue()};
}

R narrow_backward(Ctx& c, const Grads& g) {
  const auto in = shape(c, 0);
  const int64_t dim =
      detail::wrap_dim(arg(c, 1).to_int(), static_cast<int64_t>(in.size()), "narrow");
  int64_t start = arg(c, 2).to_symint().guard_int();
  if (start < 0) start += in[static_cast<size_t>(dim)].guard_int();
  const int64_t n = g[0].sizes()[dim].guard_int();
  return {scatter_back(g[0], in, dim, range_index(start, n, 1)), IValue(), IValue(), IValue()};
}

R select_backward(Ctx& c, const Grads& g) {
  const auto in = shape(c, 0);
  const int64_t dim =
      detail::wrap_dim(arg(c, 1).to_int(), static_cast<int64_t>(in.size()), "select");
  int64_t index = arg(c, 2).to_symint().guard_int();
  if (index < 0) index += in[static_cast<size_t>(dim)].guard_int();
  return {scatter_back(g[0].unsqueeze(dim), in, dim, range_index(index, 1, 1)), IValue(), IValue()};
}

R as_strided_backward(Ctx& c, const Grads& g) {
  // Scatter the gradient through the same geometry into a buffer laid out like the input; the
  // output geometry must not overlap itself (then every buffer element gets at most one value).
  const Tensor x = c.saved(0);
  const auto sizes = arg(c, 1).to_symint_list();
  const auto strides = arg(c, 2).to_symint_list();
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i].guard_int() > 1) dims.emplace_back(strides[i].guard_int(), sizes[i].guard_int());
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;
  for (auto [st, sz] : dims) {
    TS_CHECK(st >= span, NotImplementedError) << "[aten::as_strided] the backward of an as_strided "
                                                 "view whose elements overlap is not supported";
    span = st * sz;
  }
  const int64_t base = x.storage_offset().guard_int();
  const IValue& off = arg(c, 3);
  const int64_t out_offset = off.is_none() ? base : off.to_symint().guard_int();
  int64_t extent = base + 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    extent += (x.sizes()[d].guard_int() - 1) * x.strides()[d].guard_int();
  extent = std::max(extent, out_offset + span);
  Tensor buffer = zeros({extent}, g[0].options());
  {
    NoGradGuard ng;
    as_strided(buffer, sizes, strides, out_offset).copy_(g[0]);
  }
  return {as_strided(buffer, x.sizes().vec(), x.strides().vec(), x.storage_offset()).clone(),
          IValue(), IValue(), IValue()};
}

// ---- the table
// ------------------------------------------------------------------------------------

}  // namespace

void register_builtin_derivatives() {
  const double kLn2 = std::numbers::ln2;

  // Pointwise, unary.
  def("aten::neg", keep(), [](Ctx&, const Grads& g) -> R { return {-g[0]}; });
  def("aten::abs", keep({0}),
      [](Ctx& c, const Grads& g) -> R { return {g[0] * sign(c.saved(0))}; });
  def("aten::exp", keep({}, {0}), [](Ctx& c, const Grads& g) -> R { return {g[0] * c.saved(0)}; });
  def("aten::exp2", keep({}, {0}),
      [=](Ctx& c, const Grads& g) -> R { return {g[0] * c.saved(0) * kLn2}; });
  def("aten::log", keep({0}), [](Ctx& c, const Grads& g) -> R { return {g[0] / c.saved(0)}; });
  def("aten::log2", keep({0}),
      [=](Ctx& c, const Grads& g) -> R { return {g[0] / (c.saved(0) * kLn2)}; });
  def("aten::sqrt", keep({}, {0}),
      [](Ctx& c, const Grads& g) -> R { return {g[0] / (c.saved(0) * 2)}; });
  def("aten::rsqrt", keep({}, {0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor y = c.saved(0);
    return {g[0] * (y * y * y) * -0.5};
  });
  def("aten::sin", keep({0}), [](Ctx& c, const Grads& g) -> R { return {g[0] * cos(c.saved(0))}; });
  def("aten::cos", keep({0}),
      [](Ctx& c, const Grads& g) -> R { return {-(g[0] * sin(c.saved(0)))}; });
  def("aten::tanh", keep({}, {0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor y = c.saved(0);
    return {g[0] * (1 - y * y)};
  });
  def("aten::sigmoid", keep({}, {0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor y = c.saved(0);
    return {g[0] * y * (1 - y)};
  });
  def("aten::erf", keep({0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor x = c.saved(0);
    return {g[0] * exp(-(x * x)) * (2 / std::sqrt(std::numbers::pi))};
  });
  def("aten::relu", keep({}, {0}),
      [](Ctx& c, const Grads& g) -> R { return {where(c.saved(0) > 0, g[0], 0)}; });
  def("aten::gelu", keep({0}), [](Ctx& c, const Grads& g) -> R {
    return {gelu_backward(g[0], c.saved(0), arg(c, 1).to_string()), IValue()};
  });
  // (double backward) d/dg = gelu'(x); d/dx = g gelu''(x): erf form phi(x) (2 - x^2); tanh form,
  // with u = k (x + c x^3) and t = tanh(u): (1 - t^2) (u' - x t u'^2 + x u'' / 2)
  def("aten::gelu_backward", keep({0, 1}), [](Ctx& c, const Grads& g) -> R {
    const Tensor gy = c.saved(0), x = c.saved(1);
    const std::string approximate = arg(c, 2).to_string();
    Tensor second;
    if (approximate == "tanh") {
      const double k = std::sqrt(2 / std::numbers::pi), cc = 0.044715;
      const Tensor t = tanh((x + x * x * x * cc) * k);
      const Tensor du = (1 + x * x * (3 * cc)) * k, ddu = x * (6 * k * cc);
      second = (1 - t * t) * (du - x * t * du * du + x * ddu * 0.5);
    } else {
      second = exp(x * x * -0.5) * (1 / std::sqrt(2 * std::numbers::pi)) * (2 - x * x);
    }
    return {gelu_backward(g[0], x, approximate), g[0] * gy * second, IValue()};
  });
  def("aten::silu", keep({0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor x = c.saved(0);
    const Tensor s = sigmoid(x);
    return {g[0] * s * (1 + x * (1 - s))};
  });
  def("aten::clamp", keep({0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor x = c.saved(0);
    Tensor keep_mask = ones_like(x, TensorOptions().dtype(DType::Bool));
    if (!arg(c, 1).is_none()) keep_mask = logical_and(keep_mask, x >= arg(c, 1).to_scalar());
    if (!arg(c, 2).is_none()) keep_mask = logical_and(keep_mask, x <= arg(c, 2).to_scalar());
    return {where(keep_mask, g[0], 0), IValue(), IValue()};
  });
  def("aten::clone", keep(), [](Ctx&, const Grads& g) -> R { return {g[0]}; });
  def("aten::_to_copy", keep(), [](Ctx&, const Grads& g) -> R {
    return {g[0], IValue(), IValue()};
  });
  def("aten::cumsum", keep(), [](Ctx& c, const Grads& g) -> R {
    // The reversed cumulative sum: total - cumsum(g) + g.
    const int64_t dim = arg(c, 1).to_int();
    const Tensor gs = g[0].dim() == 0 ? g[0] : g[0].sum({dim}, true);
    return {g[0].dim() == 0 ? g[0] : gs - cumsum(g[0], dim) + g[0], IValue(), IValue()};
  });

  // Pointwise, binary (gradients are summed back over broadcast dims).
  // alpha = 1 (every `a + b`) multiplies nothing: one pass less per gradient.
  def("aten::add.Tensor", keep(), [](Ctx& c, const Grads& g) -> R {
    const Scalar alpha = scalar_arg(c, 2);
    Tensor ga, gb;
    if (c.needs_input_grad(0)) ga = sum_to(g[0], shape(c, 0));
    if (c.needs_input_grad(1)) gb = sum_to(alpha == Scalar(1) ? g[0] : g[0] * alpha, shape(c, 1));
    return {ga, gb, IValue()};
  });
  def("aten::add.Scalar", keep(), [](Ctx&, const Grads& g) -> R {
    return {g[0], IValue(), IValue()};
  });
  def("aten::sub.Tensor", keep(), [](Ctx& c, const Grads& g) -> R {
    const Scalar alpha = scalar_arg(c, 2);
    Tensor ga, gb;
    if (c.needs_input_grad(0)) ga = sum_to(g[0], shape(c, 0));
    if (c.needs_input_grad(1))
      gb = sum_to(alpha == Scalar(1) ? -g[0] : -(g[0] * alpha), shape(c, 1));
    return {ga, gb, IValue()};
  });
  def("aten::sub.Scalar", keep(), [](Ctx&, const Grads& g) -> R {
    return {g[0], IValue(), IValue()};
  });
  def("aten::mul.Tensor", keep({0, 1}), [](Ctx& c, const Grads& g) -> R {
    Tensor ga, gb;
    if (c.needs_input_grad(0)) ga = sum_to(g[0] * c.saved(1), shape(c, 0));
    if (c.needs_input_grad(1)) gb = sum_to(g[0] * c.saved(0), shape(c, 1));
    return {ga, gb};
  });
  def("aten::mul.Scalar", keep(), [](Ctx& c, const Grads& g) -> R {
    return {g[0] * scalar_arg(c, 1), IValue()};
  });
  def("aten::div.Tensor", keep({0, 1}), [](Ctx& c, const Grads& g) -> R {
    if (!arg(c, 2).is_none())
      return {IValue(), IValue(), IValue()};  // rounding: piecewise constant
    const Tensor a = c.saved(0), b = c.saved(1);
    Tensor ga, gb;
    if (c.needs_input_grad(0)) ga = sum_to(g[0] / b, shape(c, 0));
    if (c.needs_input_grad(1)) gb = sum_to(-(g[0] * a) / (b * b), shape(c, 1));
    return {ga, gb, IValue()};
  });
  def("aten::div.Scalar", keep(), [](Ctx& c, const Grads& g) -> R {
    if (!arg(c, 2).is_none()) return {IValue(), IValue(), IValue()};
    return {g[0] / scalar_arg(c, 1), IValue(), IValue()};
  });
  def("aten::remainder.Tensor", keep({0, 1}), [](Ctx& c, const Grads& g) -> R {
    Tensor gb;
    if (c.needs_input_grad(1))
      gb = sum_to(-(g[0] * div(c.saved(0), c.saved(1), "floor")), shape(c, 1));
    return {sum_to(g[0], shape(c, 0)), gb};
  });
  def("aten::remainder.Scalar", keep(), [](Ctx&, const Grads& g) -> R { return {g[0], IValue()}; });
  def("aten::pow.Tensor_Scalar", keep({0}), [](Ctx& c, const Grads& g) -> R {
    const Scalar e = scalar_arg(c, 1);
    if (e.to<double>() == 0) return {zeros_like(g[0]), IValue()};
    return {g[0] * e * pow(c.saved(0), e.to<double>() - 1), IValue()};
  });
  def("aten::pow.Tensor_Tensor", keep({0, 1}, {0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor a = c.saved(0), e = c.saved(1), y = c.saved(2);
    Tensor ga, ge;
    if (c.needs_input_grad(0)) ga = sum_to(where(e != 0, g[0] * e * pow(a, e - 1), 0), shape(c, 0));
    if (c.needs_input_grad(1)) {
      // d/de a^e = a^e log a; where a == 0 and e >= 0 the limit is 0.
      ge = sum_to(where(logical_not(logical_and(a == 0, e >= 0)), g[0] * y * log(a), 0),
                  shape(c, 1));
    }
    return {ga, ge};
  });
  def("aten::pow.Scalar", keep({}, {0}), [](Ctx& c, const Grads& g) -> R {
    const double base = to_double(arg(c, 0));
    if (base == 0) return {IValue(), zeros_like(g[0])};
    return {IValue(), g[0] * c.saved(0) * std::log(base)};
  });
  for (const char* op : {"aten::maximum.Tensor", "aten::minimum.Tensor"}) {
    def(op, keep({0, 1}), [](Ctx& c, const Grads& g) -> R {
      // The larger (smaller) input gets the gradient; ties split it evenly.
      const Tensor a = c.saved(0), b = c.saved(1);
      const bool mx = c.op_name().find("maximum") != std::string::npos;
      const Tensor wins = mx ? a > b : a < b;
      const Tensor half = where(a == b, g[0] * 0.5, 0);
      return {sum_to(where(wins, g[0], half), shape(c, 0)),
              sum_to(where(logical_or(wins, a == b), half, g[0]), shape(c, 1))};
    });
  }
  for (const char* op : {"aten::maximum.Scalar", "aten::minimum.Scalar"}) {
    def(op, keep({0}), [](Ctx& c, const Grads& g) -> R {
      const Tensor a = c.saved(0);
      const Scalar b = scalar_arg(c, 1);
      const bool mx = c.op_name().find("maximum") != std::string::npos;
      return {where(mx ? a > b : a < b, g[0], where(a == b, g[0] * 0.5, 0)), IValue()};
    });
  }
  def("aten::where.self", keep({0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor cond = c.saved(0);
    return {IValue(), sum_to(where(cond, g[0], 0), shape(c, 1)),
            sum_to(where(logical_not(cond), g[0], 0), shape(c, 2))};
  });
  def("aten::where.ScalarOther", keep({0}), [](Ctx& c, const Grads& g) -> R {
    return {IValue(), sum_to(where(c.saved(0), g[0], 0), shape(c, 1)), IValue()};
  });

  // Reductions.
  def("aten::sum", keep(), [](Ctx& c, const Grads& g) -> R {
    return {g[0].expand(shape(c, 0)), IValue()};
  });
  def("aten::sum.dim_IntList", keep(), [](Ctx& c, const Grads& g) -> R {
    const auto in = shape(c, 0);
    const auto dims = reduced_dims(arg(c, 1), static_cast<int64_t>(in.size()));
    return {unsqueeze_reduced(g[0], dims, arg(c, 2).to_bool(), static_cast<int64_t>(in.size()))
                .expand(in),
            IValue(), IValue(), IValue()};
  });
  def("aten::mean", keep(), [](Ctx& c, const Grads& g) -> R {
    const auto in = shape(c, 0);
    return {divide_by_size(g[0].expand(in), sym_product(in)), IValue()};
  });
  def("aten::mean.dim", keep(), [](Ctx& c, const Grads& g) -> R {
    const auto in = shape(c, 0);
    const auto dims = reduced_dims(arg(c, 1), static_cast<int64_t>(in.size()));
    SymInt n = 1;
    for (int64_t d : dims) n = in.empty() ? n : n * in[static_cast<size_t>(d)];
    const Tensor gk =
        unsqueeze_reduced(g[0], dims, arg(c, 2).to_bool(), static_cast<int64_t>(in.size()));
    return {divide_by_size(gk.expand(in), n), IValue(), IValue(), IValue()};
  });
  for (const char* op : {"aten::amax", "aten::amin"}) {
    def(op, keep({0}, {0}), [](Ctx& c, const Grads& g) -> R {
      const Tensor x = c.saved(0);
      const auto dims =
          reduced_dims(arg(c, 1).to_int_list().empty() ? IValue() : arg(c, 1), x.dim());
      return {extreme_grad(g[0], x, c.saved(1), dims, arg(c, 2).to_bool() || x.dim() == 0),
              IValue(), IValue()};
    });
  }
  for (const char* op : {"aten::max", "aten::min"}) {
    def(op, keep({0}, {0}), [](Ctx& c, const Grads& g) -> R {
      const Tensor x = c.saved(0);
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
      return {extreme_grad(g[0], x, c.saved(1), dims, false)};
    });
  }
  for (const char* op : {"aten::max.dim", "aten::min.dim"}) {
    def(op, keep({}, {1}), [](Ctx& c, const Grads& g) -> R {
      // The gradient goes to the index the forward picked.
      const auto in = shape(c, 0);
      const int64_t nd = static_cast<int64_t>(in.size());
      if (nd == 0) return {g[0], IValue(), IValue()};
      const int64_t dim = detail::wrap_dim(arg(c, 1).to_int(), nd, "max");
      const bool keepdim = arg(c, 2).to_bool();
      const Tensor idx = unsqueeze_reduced(c.saved(0), {dim}, keepdim, nd);
      const Tensor gk = unsqueeze_reduced(g[0], {dim}, keepdim, nd);
      std::vector<SymInt> ar_shape(static_cast<size_t>(nd), SymInt(1));
      ar_shape[static_cast<size_t>(dim)] = in[static_cast<size_t>(dim)];
      const Tensor positions =
          arange(in[static_cast<size_t>(dim)].guard_int(), TensorOptions().dtype(DType::Int64))
              .view(ar_shape);
      return {where(positions == idx, gk, 0).expand(in), IValue(), IValue()};
    });
  }
  auto prod_backward = [](const Tensor& g, const Tensor& x, const Tensor& y,
                          const std::vector<int64_t>& dims, bool keepdim) {
    // y / x, except where x has zeros: one zero gets the product of the others; two or more, 0.
    const Tensor yk = unsqueeze_reduced(y, dims, keepdim, x.dim());
    const Tensor gk = unsqueeze_reduced(g, dims, keepdim, x.dim());
    const Tensor is_zero = x == 0;
    const Tensor zeros_n =
        dims.size() == static_cast<size_t>(x.dim()) ? is_zero.sum() : is_zero.sum(dims, true);
    const Tensor nonzero = where(logical_not(is_zero), x, 1);
    const Tensor others = dims.size() == static_cast<size_t>(x.dim())
                              ? prod(nonzero)
                              : prod(nonzero, dims[0], /*keepdim=*/true);
    const Tensor safe =
        where(zeros_n == 0, yk / nonzero, where(logical_and(zeros_n == 1, is_zero), others, 0));
    return gk * safe;
  };
  def("aten::prod", keep({0}, {0}), [=](Ctx& c, const Grads& g) -> R {
    const Tensor x = c.saved(0);
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
    return {prod_backward(g[0], x, c.saved(1), dims, false), IValue()};
  });
  def("aten::prod.dim_int", keep({0}, {0}), [=](Ctx& c, const Grads& g) -> R {
    const Tensor x = c.saved(0);
    if (x.dim() == 0) return {g[0], IValue(), IValue(), IValue()};
    const int64_t dim = detail::wrap_dim(arg(c, 1).to_int(), x.dim(), "prod");
    return {prod_backward(g[0], x, c.saved(1), {dim}, arg(c, 2).to_bool()), IValue(), IValue(),
            IValue()};
  });
  def("aten::var", keep({0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor x = c.saved(0);
    const auto dims = reduced_dims(arg(c, 1), x.dim());
    int64_t n = 1;
    for (int64_t d : dims) n *= x.dim() == 0 ? 1 : x.sizes()[d].guard_int();
    const double denom = std::max(0.0, static_cast<double>(n) - arg(c, 2).to_double());
    const Tensor mu = x.dim() == 0 ? x : x.mean(dims, true);
    const Tensor gk = unsqueeze_reduced(g[0], dims, arg(c, 3).to_bool(), x.dim());
    return {gk * (x - mu) * (2 / denom), IValue(), IValue(), IValue()};
  });
  def("aten::softmax.int", keep({}, {0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor y = c.saved(0);
    const int64_t dim = arg(c, 1).to_int();
    const Tensor gy = g[0].to(y.dtype());
    return {y * (gy - (gy * y).sum({dim}, true)), IValue(), IValue()};
  });
  def("aten::log_softmax.int", keep({}, {0}), [](Ctx& c, const Grads& g) -> R {
    const Tensor y = c.saved(0);
    const int64_t dim = arg(c, 1).to_int();
    const Tensor gy = g[0].to(y.dtype());
    return {gy - exp(y) * gy.sum({dim}, true), IValue(), IValue()};
  });

  // Linear algebra and normalization.
  def("aten::matmul", keep({0, 1}), matmul_backward);
  def("aten::layer_norm", keep({0, 2}), layer_norm_backward);
  def("aten::rms_norm", keep({0, 2}), rms_norm_backward);

  // Joining and indexing.
  def("aten::cat", keep(), [](Ctx& c, const Grads& g) -> R {
    const auto packed = shape(c, 0);
    std::vector<Tensor> parts;
    std::vector<std::vector<SymInt>> shapes;
    for (size_t i = 0; i < packed.size();) {
      const int64_t rank = packed[i].guard_int();
      shapes.emplace_back(packed.begin() + static_cast<int64_t>(i) + 1,
                          packed.begin() + static_cast<int64_t>(i) + 1 + rank);
      i += static_cast<size_t>(rank) + 1;
    }
    int64_t dim = 0;
    for (const auto& s : shapes) {
      if (!s.empty())
        dim = detail::wrap_dim(arg(c, 1).to_int(), static_cast<int64_t>(s.size()), "cat");
    }
    int64_t offset = 0;
    for (const auto& s : shapes) {
      if (s.size() == 1 && s[0].guard_int() == 0 && g[0].dim() != 1) {  // a skipped empty input
        parts.push_back(zeros(s, g[0].options()));
        continue;
      }
      const int64_t n = s[static_cast<size_t>(dim)].guard_int();
      parts.push_back(g[0].narrow(dim, offset, n));
      offset += n;
    }
    return {IValue(parts), IValue()};
  });
  def("aten::index_select", keep({2}), [](Ctx& c, const Grads& g) -> R {
    const auto in = shape(c, 0);
    const int64_t dim = detail::wrap_dim(
        arg(c, 1).to_int(), std::max<int64_t>(static_cast<int64_t>(in.size()), 1), "index_select");
    return {scatter_back(g[0], in, dim, c.saved(0)), IValue(), IValue()};
  });
  def("aten::index_add", keep({2}), [](Ctx& c, const Grads& g) -> R {
    const auto in = shape(c, 0);
    const int64_t dim = detail::wrap_dim(
        arg(c, 1).to_int(), std::max<int64_t>(static_cast<int64_t>(in.size()), 1), "index_add");
    Tensor gs;
    if (c.needs_input_grad(3)) gs = index_select(g[0], dim, c.saved(0)) * scalar_arg(c, 4);
    return {g[0], IValue(), IValue(), gs, IValue()};
  });

  // Views.
  def("aten::alias", keep(), [](Ctx&, const Grads& g) -> R { return {g[0]}; });
  def("aten::view", keep(), [](Ctx& c, const Grads& g) -> R {
    return {g[0].reshape(shape(c, 0)), IValue()};
  });
  def("aten::expand", keep(), [](Ctx& c, const Grads& g) -> R {
    return {sum_to(g[0], shape(c, 0)), IValue()};
  });
  def("aten::permute", keep(), [](Ctx& c, const Grads& g) -> R {
    const auto dims = arg(c, 1).to_int_list();
    std::vector<int64_t> inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) {
      inverse[static_cast<size_t>(detail::wrap_dim(dims[i], static_cast<int64_t>(dims.size()),
                                                   "permute"))] = static_cast<int64_t>(i);
    }
    return {g[0].permute(inverse), IValue()};
  });
  def("aten::transpose.int", keep(), [](Ctx& c, const Grads& g) -> R {
    return {g[0].transpose(arg(c, 1).to_int(), arg(c, 2).to_int()), IValue(), IValue()};
  });
  def("aten::squeeze", keep(),
      [](Ctx& c, const Grads& g) -> R { return {g[0].reshape(shape(c, 0))}; });
  def("aten::squeeze.dim", keep(), [](Ctx& c, const Grads& g) -> R {
    return {g[0].reshape(shape(c, 0)), IValue()};
  });
  def("aten::unsqueeze", keep(), [](Ctx& c, const Grads& g) -> R {
    return {g[0].reshape(shape(c, 0)), IValue()};
  });
  def("aten::narrow", keep(), narrow_backward);
  def("aten::slice.Tensor", keep(), slice_backward);
  def("aten::select.int", keep(), select_backward);
  def("aten::as_strided", keep({0}), as_strided_backward);

  // Not differentiable: comparisons, logical and bitwise ops, integer results, factories,
  // whole-tensor predicates, detach and reinterpreting views.
  for (const char* op : {"aten::eq.Scalar",
                         "aten::eq.Tensor",
                         "aten::ne.Scalar",
                         "aten::ne.Tensor",
                         "aten::lt.Scalar",
                         "aten::lt.Tensor",
                         "aten::le.Scalar",
                         "aten::le.Tensor",
                         "aten::gt.Scalar",
                         "aten::gt.Tensor",
                         "aten::ge.Scalar",
                         "aten::ge.Tensor",
                         "aten::logical_and.Scalar",
                         "aten::logical_and.Tensor",
                         "aten::logical_or.Scalar",
                         "aten::logical_or.Tensor",
                         "aten::logical_xor.Scalar",
                         "aten::logical_xor.Tensor",
                         "aten::logical_not",
                         "aten::bitwise_and.Scalar",
                         "aten::bitwise_and.Tensor",
                         "aten::bitwise_or.Scalar",
                         "aten::bitwise_or.Tensor",
                         "aten::bitwise_xor.Scalar",
                         "aten::bitwise_xor.Tensor",
                         "aten::bitwise_not",
                         "aten::bitwise_left_shift.Scalar",
                         "aten::bitwise_left_shift.Tensor",
                         "aten::bitwise_right_shift.Scalar",
                         "aten::bitwise_right_shift.Tensor",
                         "aten::argmax",
                         "aten::argmin",
                         "aten::isclose",
                         "aten::allclose",
                         "aten::equal",
                         "aten::detach",
                         "aten::view.dtype",
                         "aten::empty",
                         "aten::empty_like",
                         "aten::empty_strided",
                         "aten::full",
                         "aten::full_like",
                         "aten::arange.start_step",
                         "aten::rand",
                         "aten::randn",
                         "aten::randint.low"}) {
    set_nondifferentiable(op);
  }
}

}  // namespace tessera::autograd
