// gradcheck: analytical Jacobians (one backward per output element) against central differences.
#include <cmath>
#include <sstream>

#include "autograd/internal.h"
#include "tessera/ops.h"

namespace tessera::autograd {
namespace {

// The address of element `linear` (row-major logical order) of a float64 CPU tensor.
double* element(const Tensor& t, int64_t linear) {
  const auto sizes = t.impl()->int_sizes();
  const auto strides = t.impl()->int_strides();
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (linear % sizes[d]) * strides[d];
    linear /= sizes[d];
  }
  return static_cast<double*>(t.impl()->data()) + off;
}

std::vector<Tensor> float_outputs(const std::vector<Tensor>& outs) {
  std::vector<Tensor> r;
  for (const auto& o : outs) {
    if (o.defined() && is_floating_point(o.dtype())) r.push_back(o);
  }
  return r;
}

}  // namespace

bool gradcheck(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
               const std::vector<Tensor>& inputs, GradcheckOptions o, SourceLoc loc) {
  UserLocGuard guard(loc);
  std::vector<size_t> wrt;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    TS_CHECK(inputs[i].dtype() == DType::Float64 && inputs[i].is_cpu(), DTypeError)
        << "gradcheck: input " << i
        << " must be a float64 CPU tensor (finite differences need the precision), got "
        << dtype_name(inputs[i].dtype());
    TS_CHECK(inputs[i].is_leaf(), ValueError) << "gradcheck: input " << i << " must be a leaf";
    wrt.push_back(i);
  }
  TS_CHECK(!wrt.empty(), ValueError) << "gradcheck: no input requires grad";

  const std::vector<Tensor> outs = float_outputs(fn(inputs));
  TS_CHECK(!outs.empty(), ValueError) << "gradcheck: the function has no floating-point output";
  std::vector<Tensor> wrt_inputs;
  for (size_t i : wrt) wrt_inputs.push_back(inputs[i]);

  auto fail = [&](const std::string& msg) {
    TS_CHECK(!o.raise, ValueError) << "gradcheck: " << msg;
    return false;
  };

  for (size_t oi = 0; oi < outs.size(); ++oi) {
    const Tensor& out = outs[oi];
    const int64_t n_out = out.numel();
    // analytical[k][j][e]: d out[j] / d input k element e.
    std::vector<std::vector<std::vector<double>>> analytical(wrt.size());
    for (size_t k = 0; k < wrt.size(); ++k) {
      analytical[k].assign(static_cast<size_t>(n_out),
                           std::vector<double>(static_cast<size_t>(inputs[wrt[k]].numel()), 0.0));
    }
    if (out.requires_grad()) {
      for (int64_t j = 0; j < n_out; ++j) {
        Tensor seed = zeros_like(out);
        {
          NoGradGuard ng;
          seed.reshape({-1}).narrow(0, j, 1).fill_(1);
        }
        const auto grads =
            grad({out}, wrt_inputs, {seed}, /*retain_graph=*/true, false, /*allow_unused=*/true);
        for (size_t k = 0; k < wrt.size(); ++k) {
          if (!grads[k].defined()) continue;
          TS_CHECK(same_sizes(grads[k].sizes(), inputs[wrt[k]].sizes()), ValueError)
              << "gradcheck: the gradient for input " << wrt[k] << " has shape " << grads[k].sizes()
              << ", the input has shape " << inputs[wrt[k]].sizes();
          const Tensor gk = grads[k].to(DType::Float64);
          for (int64_t e = 0; e < gk.numel(); ++e) {
            analytical[k][static_cast<size_t>(j)][static_cast<size_t>(e)] =
                detail::read_double(gk, e);
          }
        }
      }
    }
    // Numerical: central differences, one input element at a time.
    for (size_t k = 0; k < wrt.size(); ++k) {
      const Tensor& x = inputs[wrt[k]];
      for (int64_t e = 0; e < x.numel(); ++e) {
        double* p = element(x, e);
        const double orig = *p;
        auto eval = [&](double v) {
          *p = v;
          NoGradGuard ng;
          auto r = float_outputs(fn(inputs));
          return r.at(oi).to(DType::Float64).clone();  // not a view of the input being perturbed
        };
        const Tensor plus = eval(orig + o.eps), minus = eval(orig - o.eps);
        *p = orig;
        for (int64_t j = 0; j < n_out; ++j) {
          const double num =
              (detail::read_double(plus, j) - detail::read_double(minus, j)) / (2 * o.eps);
          const double ana = analytical[k][static_cast<size_t>(j)][static_cast<size_t>(e)];
          if (!(std::fabs(num - ana) <= o.atol + o.rtol * std::fabs(num))) {
            std::ostringstream os;
            os << "Jacobian mismatch for output " << oi << " with respect to input " << wrt[k]
               << " (output element " << j << ", input element " << e << "): numerical " << num
               << ", analytical " << ana;
            return fail(os.str());
          }
        }
      }
    }
  }
  return true;
}

}  // namespace tessera::autograd
