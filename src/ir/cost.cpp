#include "ir/cost.h"

#include "ir/op_traits.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace tessera::ir {
namespace {

struct Scalar {
  bool known = false;
  bool is_float = false;
  int64_t i = 0;
  double f = 0;
  double as_double() const { return is_float ? f : static_cast<double>(i); }
};

class Evaluator {
 public:
  Evaluator(const Function& f, const std::vector<ParamValue>& params, const int64_t grid[3])
      : f_(f), params_(params), grid_{grid[0], grid[1], grid[2]} {}

  KernelCost program(const int64_t pid[3]) {
    pid_[0] = pid[0];
    pid_[1] = pid[1];
    pid_[2] = pid[2];
    memo_.assign(f_.num_values(), std::nullopt);
    for (size_t i = 0; i < f_.params.size() && i < params_.size(); ++i) {
      const Param& p = f_.params[i];
      if (p.value == kNoValue) continue;
      Scalar s;
      s.known = p.kind == ParamKind::Int || p.kind == ParamKind::Float;
      s.is_float = p.kind == ParamKind::Float;
      s.i = params_[i].i;
      s.f = params_[i].f;
      memo_[static_cast<size_t>(p.value)] = s;
    }
    KernelCost c;
    region(f_.body, 1.0, c);
    return c;
  }

 private:
  Scalar eval(ValueId v) {
    auto& m = memo_[static_cast<size_t>(v)];
    if (m) return *m;
    m = Scalar{};  // unknown until computed (also guards against cycles)
    const Op* op = f_.def(v);
    if (!op || !f_.type(v).is_scalar() || f_.type(v).ptr) return *m;
    Scalar r;
    switch (op->kind) {
      case OpKind::Constant:
        r.known = true;
        r.is_float = f_.type(v).is_float();
        r.i = op->ival;
        r.f = op->fval;
        break;
      case OpKind::ProgramId:
        r = {true, false, pid_[op->ival], 0};
        break;
      case OpKind::NumPrograms:
        r = {true, false, grid_[op->ival], 0};
        break;
      case OpKind::Cast: {
        const Scalar a = eval(op->operands[0]);
        if (!a.known) break;
        r.known = true;
        r.is_float = f_.type(v).is_float();
        if (r.is_float) {
          r.f = a.as_double();
        } else {
          r.i = a.is_float ? static_cast<int64_t>(a.f) : a.i;
        }
        break;
      }
      case OpKind::Binary: {
        const Scalar a = eval(op->operands[0]), b = eval(op->operands[1]);
        if (!a.known || !b.known) break;
        r.known = true;
        r.is_float = f_.type(v).is_float();
        const auto k = static_cast<BinaryKind>(op->sub);
        if (r.is_float) {
          const double x = a.as_double(), y = b.as_double();
          switch (k) {
            case BinaryKind::Add:
              r.f = x + y;
              break;
            case BinaryKind::Sub:
              r.f = x - y;
              break;
            case BinaryKind::Mul:
              r.f = x * y;
              break;
            case BinaryKind::Div:
              r.f = x / y;
              break;
            case BinaryKind::Max:
              r.f = std::max(x, y);
              break;
            case BinaryKind::Min:
              r.f = std::min(x, y);
              break;
            default:
              r.known = false;
          }
        } else {
          const int64_t x = a.i, y = b.i;
          switch (k) {
            case BinaryKind::Add:
              r.i = x + y;
              break;
            case BinaryKind::Sub:
              r.i = x - y;
              break;
            case BinaryKind::Mul:
              r.i = x * y;
              break;
            case BinaryKind::Div:
              r.i = y == 0 ? -1 : x / y;
              break;
            case BinaryKind::Rem:
              r.i = y == 0 ? x : x % y;
              break;
            case BinaryKind::Max:
              r.i = std::max(x, y);
              break;
            case BinaryKind::Min:
              r.i = std::min(x, y);
              break;
            case BinaryKind::And:
              r.i = x & y;
              break;
            case BinaryKind::Or:
              r.i = x | y;
              break;
            case BinaryKind::Xor:
              r.i = x ^ y;
              break;
            default:
              r.known = false;
          }
        }
        break;
      }
      case OpKind::Compare: {
        const Scalar a = eval(op->operands[0]), b = eval(op->operands[1]);
        if (!a.known || !b.known) break;
        const double x = a.as_double(), y = b.as_double();
        bool t = false;
        switch (static_cast<CmpKind>(op->sub)) {
          case CmpKind::EQ:
            t = x == y;
            break;
          case CmpKind::NE:
            t = x != y;
            break;
          case CmpKind::LT:
            t = x < y;
            break;
          case CmpKind::LE:
            t = x <= y;
            break;
          case CmpKind::GT:
            t = x > y;
            break;
          case CmpKind::GE:
            t = x >= y;
            break;
        }
        r = {true, false, t ? 1 : 0, 0};
        break;
      }
      case OpKind::Select: {
        const Scalar c = eval(op->operands[0]);
        if (c.known) r = eval(op->operands[c.i ? 1 : 2]);
        break;
      }
      default:
        break;
    }
    m = r;
    return r;
  }

  void region(const Region& reg, double mult, KernelCost& c) {
    for (const Op* op : reg.ops) {
      // Ops with a fixed count per element (the op-trait table's flops; Fma counts 2).
      if (const int per = traits(op->kind).flops; per > 0 && !op->results.empty()) {
        const Type& t = f_.type(op->result());
        if (t.is_float()) c.flops += per * static_cast<double>(t.numel()) * mult;
      }
      switch (op->kind) {
        case OpKind::Dot: {
          const Type& a = f_.type(op->operands[0]);
          const Type& r = f_.type(op->result());
          if (r.is_float()) c.flops += 2.0 * static_cast<double>(r.numel() * a.shape[1]) * mult;
          break;
        }
        case OpKind::Unary: {
          const Type& t = f_.type(op->result());
          if (t.is_float())
            c.flops += unary_traits(static_cast<UnaryKind>(op->sub)).flops *
                       static_cast<double>(t.numel()) * mult;
          break;
        }
        case OpKind::Reduce: {
          const Type& in = f_.type(op->operands[0]);
          if (in.is_float()) c.flops += static_cast<double>(in.numel()) * mult;
          break;
        }
        case OpKind::Load: {
          const Type& t = f_.type(op->result());
          c.bytes_read +=
              static_cast<double>(t.numel() * static_cast<int64_t>(itemsize(t.elem))) * mult;
          break;
        }
        case OpKind::Store: {
          const Type& p = f_.type(op->operands[0]);
          c.bytes_written +=
              static_cast<double>(p.numel() * static_cast<int64_t>(itemsize(p.elem))) * mult;
          break;
        }
        case OpKind::For: {
          const Scalar lb = eval(op->operands[0]), ub = eval(op->operands[1]),
                       st = eval(op->operands[2]);
          double trips = 1;
          if (lb.known && ub.known && st.known && st.as_double() > 0) {
            trips = std::max(0.0, std::ceil((ub.as_double() - lb.as_double()) / st.as_double()));
          } else {
            c.exact = false;
          }
          region(op->regions[0], mult * trips, c);
          break;
        }
        case OpKind::While:
          // Unknown trip count: the condition and body counted once.
          c.exact = false;
          region(op->regions[0], mult, c);
          region(op->regions[1], mult, c);
          break;
        case OpKind::If: {
          const Scalar cond = eval(op->operands[0]);
          if (cond.known) {
            region(op->regions[cond.i ? 0 : 1], mult, c);
          } else {
            KernelCost a, b;
            region(op->regions[0], mult, a);
            region(op->regions[1], mult, b);
            c += a.flops >= b.flops ? a : b;
            c.exact = false;
          }
          break;
        }
        default:
          break;
      }
    }
  }

  const Function& f_;
  const std::vector<ParamValue>& params_;
  int64_t grid_[3];
  int64_t pid_[3] = {0, 0, 0};
  std::vector<std::optional<Scalar>> memo_;
};

bool has_control_flow(const Function& f) {
  bool any = false;
  walk(f.body,
       [&](const Op* op) { any = any || op->kind == OpKind::For || op->kind == OpKind::If; });
  return any;
}

}  // namespace

KernelCost launch_cost(const Function& f, const std::vector<ParamValue>& params,
                       const int64_t grid[3]) {
  const int64_t total = grid[0] * grid[1] * grid[2];
  KernelCost sum;
  if (total <= 0) return sum;
  Evaluator ev(f, params, grid);
  auto coords = [&](int64_t p, int64_t pid[3]) {
    pid[0] = p % grid[0];
    pid[1] = (p / grid[0]) % grid[1];
    pid[2] = p / (grid[0] * grid[1]);
  };
  if (!has_control_flow(f)) {
    int64_t pid[3] = {0, 0, 0};
    KernelCost one = ev.program(pid);
    one.flops *= static_cast<double>(total);
    one.bytes_read *= static_cast<double>(total);
    one.bytes_written *= static_cast<double>(total);
    return one;
  }
  // Programs may differ (trip counts from program_id): evaluate each, or an even sample of them.
  constexpr int64_t kMaxPrograms = 4096;
  const int64_t n = std::min(total, kMaxPrograms);
  for (int64_t k = 0; k < n; ++k) {
    int64_t pid[3];
    coords(n == total ? k : k * total / n, pid);
    sum += ev.program(pid);
  }
  if (n < total) {
    const double scale = static_cast<double>(total) / static_cast<double>(n);
    sum.flops *= scale;
    sum.bytes_read *= scale;
    sum.bytes_written *= scale;
  }
  return sum;
}

}  // namespace tessera::ir
