#include "backend/common/c_expr.h"

#include <algorithm>

#include "backend/common/c_family.h"
#include "backend/common/link_inputs.h"
#include "ir/access.h"
#include "ir/affine.h"
#include "ir/index_map.h"
#include "ir/op_traits.h"
#include "tessera/error.h"

namespace tessera::backend::cfamily {

std::vector<std::string> rem_no_straddle_guards(const std::string& base, const std::string& mod,
                                                int64_t lo, int64_t hi) {
  const std::string q = "trt::irem<int64_t>(" + base + ", " + mod + ")";
  std::vector<std::string> g = {"(" + base + " + " + std::to_string(lo) + "LL >= 0)"};
  if (lo != 0) g.push_back("(" + q + " + " + std::to_string(lo) + "LL >= 0)");
  g.push_back("(" + q + " + " + std::to_string(hi) + "LL < " + mod + ")");
  return g;
}

std::string rem_shift_expr(const std::string& base, const std::string& mod) {
  return "(" + base + " - trt::irem<int64_t>(" + base + ", " + mod + "))";
}

using ir::Op;
using ir::OpKind;
using ir::Storage;
using ir::Type;
using ir::ValueId;

std::string flat(const SmallVector<int64_t, 4>& shape, const Index& idx) {
  std::string s;
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    const std::string& i = idx[static_cast<size_t>(d)];
    if (i != "0" && shape[d] != 1) {
      std::string term = stride == 1 ? i : i + " * " + std::to_string(stride);
      s = s.empty() ? term : term + " + " + s;
    }
    stride *= shape[d];
  }
  return s.empty() ? "0" : s;
}

ExprPrinter::ExprPrinter(const ir::Function& f, bool checked, bool reread_loads)
    : f_(f), uses_(f), plan_(f, uses_, reread_loads), checked_(checked) {
  if (checked_) prov_ = ir::pointer_provenance(f_);
}

std::string ExprPrinter::expr(ValueId v, const Index& idx) {
  switch (storage(v)) {
    case Storage::Scalar:
      return name(v);
    case Storage::Array:
      return array_ref(v, idx);
    case Storage::Inline:
      break;
  }
  const Op* op = f_.def(v);
  TS_INTERNAL_ASSERT(op) << "inline value without a defining op";
  return op_expr(*op, idx);
}

std::string ExprPrinter::array_ref(ValueId v, const Index& idx) {
  return name(v) + "[" + flat(f_.type(v).shape, idx) + "]";
}

Index ExprPrinter::source_index(const Op& op, const Index& idx, size_t k) const {
  CIndexAlgebra alg;
  return ir::operand_index(f_, op, k, idx, alg);
}

std::string ExprPrinter::op_expr(const Op& op, const Index& idx) {
  const Type& t = f_.type(op.result());
  auto operand = [&](size_t i, const Index& ix) { return expr(op.operands[i], ix); };
  switch (op.kind) {
    case OpKind::Constant:
      if (t.is_float()) return float_literal(op.fval, t.elem != DType::Float64);
      return int_literal(op.ival, t.elem);
    case OpKind::ProgramId:
      return "_pid" + std::to_string(op.ival);
    case OpKind::NumPrograms:
      return std::string("((int32_t)_g->") + "xyz"[op.ival] + ")";
    case OpKind::Arange:
      return "((int32_t)(" + std::to_string(op.ival) + " + " + idx.at(0) + "))";
    case OpKind::Splat:
      return operand(0, {});
    case OpKind::Broadcast:
    case OpKind::ExpandDims:
    case OpKind::Permute:
    case OpKind::Reshape:
    case OpKind::Extract:
    case OpKind::Flip:
      return operand(0, source_index(op, idx));
    case OpKind::Join:
    case OpKind::Cat: {
      const ir::OperandPick pick = ir::operand_pick(f_, op);
      return "(" + idx[pick.dim] + " < " + std::to_string(pick.bound) + " ? " +
             operand(0, source_index(op, idx, 0)) + " : " + operand(1, source_index(op, idx, 1)) +
             ")";
    }
    case OpKind::Gather: {
      Index ix = idx;
      const auto axis = static_cast<size_t>(op.ival);
      ix[axis] = "trt::gather_index(" + operand(1, idx) + ", " +
                 std::to_string(f_.type(op.operands[0]).shape[axis]) + ")";
      return operand(0, ix);
    }
    case OpKind::Extern: {
      // The user's function of scalars of the operands' types (preamble() emitted its library).
      const ir::ExternCall e = ir::unpack_extern(op.text);
      std::string call = e.symbol + "(";
      for (size_t i = 0; i < op.operands.size(); ++i) {
        call += (i ? ", " : "") + std::string("(") + register_type(f_.type(op.operands[i]).elem) +
                ")(" + operand(i, idx) + ")";
      }
      return "((" + std::string(register_type(t.elem)) + ")" + call + "))";
    }
    case OpKind::Bitcast: {
      const Type& s = f_.type(op.operands[0]);
      if (t.ptr) return "((" + type_str(t) + ")(uintptr_t)(" + operand(0, idx) + "))";
      if (s.ptr)
        return "((" + std::string(register_type(t.elem)) + ")(uintptr_t)(" + operand(0, idx) + "))";
      return from_bits(t.elem, to_bits(s.elem, operand(0, idx)));
    }
    case OpKind::Binary: {
      const auto k = static_cast<ir::BinaryKind>(op.sub);
      if (checked_ && t.elem == DType::Int32 &&
          (k == ir::BinaryKind::Add || k == ir::BinaryKind::Sub || k == ir::BinaryKind::Mul)) {
        // The checked mode reports int32 results that wrapped (offsets past 2^31).
        const int kind = k == ir::BinaryKind::Add ? 0 : k == ir::BinaryKind::Sub ? 1 : 2;
        const std::string ln =
            t.is_scalar() ? std::string("0") : "(int64_t)(" + flat(t.shape, idx) + ")";
        return "trt::dbg_arith32(_dbg, " + std::to_string(site(op, "overflow")) + ", " +
               std::to_string(kind) + ", " + operand(0, idx) + ", " + operand(1, idx) +
               ", _pid0, _pid1, _pid2, " + ln + ")";
      }
      return binary(k, t, operand(0, idx), operand(1, idx));
    }
    case OpKind::Compare:
      return "(" + operand(0, idx) + " " + compare_operator(static_cast<ir::CmpKind>(op.sub)) +
             " " + operand(1, idx) + ")";
    case OpKind::Unary:
      return unary(static_cast<ir::UnaryKind>(op.sub), t, operand(0, idx));
    case OpKind::Cast:
      return cast_expr(f_.type(op.operands[0]), t, operand(0, idx));
    case OpKind::Select: {
      // (a condition a fast path decided prints as a literal: the select is one of its values)
      const std::string c = operand(0, idx);
      if (c == "true") return operand(1, idx);
      if (c == "false") return operand(2, idx);
      return "(" + c + " ? " + operand(1, idx) + " : " + operand(2, idx) + ")";
    }
    case OpKind::Fma:
      return round_to(t.elem, "trt::fma(" + operand(0, idx) + ", " + operand(1, idx) + ", " +
                                  operand(2, idx) + ")");
    case OpKind::AddPtr:
      return "(" + operand(0, idx) + " + " + offset_expr(op.operands[1], idx) + ")";
    case OpKind::Load: {
      const std::string v = load_conv(t.elem, "*" + operand(0, idx));
      const std::string other = op.operands.size() > 2 ? operand(2, idx) : "0";
      if (checked_) {
        std::string cond = check(op, "load", idx);
        if (op.operands.size() > 1) cond = "(" + operand(1, idx) + " && " + cond + ")";
        return "(" + cond + " ? " + v + " : " + other + ")";
      }
      if (op.operands.size() == 1) return v;
      return "(" + operand(1, idx) + " ? " + v + " : " + other + ")";
    }
    default:
      TS_INTERNAL_ASSERT(false) << "no inline expression for " << ir::op_name(op.kind);
  }
  return "";
}

int ExprPrinter::site(const Op& op, const char* what) {
  auto it = site_of_.find(&op);
  if (it != site_of_.end()) return it->second;
  sites_.push_back(CheckSite{what, op.loc, op.text, op.kind == OpKind::Assert && op.sub == 1});
  return site_of_[&op] = static_cast<int>(sites_.size() - 1);
}

std::string ExprPrinter::lane(const Op& op, const Index& idx) const {
  const Type& t = f_.type(op.operands[0]);
  return t.is_scalar() ? std::string("0") : "(int64_t)(" + flat(t.shape, idx) + ")";
}

std::string ExprPrinter::check(const Op& op, const char* what, const Index& idx) {
  const std::string p = expr(op.operands[0], idx);
  const uint64_t mask = prov_.at(static_cast<size_t>(op.operands[0]));
  // A pointer loaded from memory or made from an integer (bit 63: anywhere) has no tensor to be
  // checked against: unchecked.
  if (mask == 0 || (mask >> 63)) return "true";
  return "trt::dbg_ok(_dbg, " + std::to_string(site(op, what)) + ", " + std::to_string(mask) +
         "ULL, " + p + ", sizeof(*" + p + "), _pid0, _pid1, _pid2, " + lane(op, idx) + ")";
}

std::string ExprPrinter::lane_guard(const Op& op, size_t mask, const char* what, const Index& idx) {
  std::string cond = mask ? expr(op.operands[mask], idx) : "";
  if (checked_)
    cond = cond.empty() ? check(op, what, idx) : "(" + cond + " && " + check(op, what, idx) + ")";
  return cond;
}

std::string ExprPrinter::store_stmt(const Op& op, const Index& idx) {
  const Type& pt = f_.type(op.operands[0]);
  const std::string value = store_conv(pt.elem, expr(op.operands[1], idx));
  const size_t mask = op.operands.size() > 2 ? 2 : 0;
  if (checked_) {
    // The value first (its loads check themselves, whether or not the store is in bounds).
    const std::string v = fresh("_sv");
    return "{ " + std::string(storage_type(pt.elem)) + " const " + v + " = " + value + "; if (" +
           lane_guard(op, mask, "store", idx) + ") *" + expr(op.operands[0], idx) + " = " + v +
           "; }";
  }
  const std::string dst = "*" + expr(op.operands[0], idx) + " = " + value + ";";
  return mask ? "if (" + expr(op.operands[mask], idx) + ") { " + dst + " }" : dst;
}

std::string ExprPrinter::assert_stmt(const Op& op, const Index& idx) {
  const int s = site(op, "assert");
  return "if (!(" + expr(op.operands[0], idx) + ")) trt::dbg_assert(_dbg, " + std::to_string(s) +
         ", " + (op.sub == 1 ? "1" : "0") + ", _pid0, _pid1, _pid2, " + lane(op, idx) + ");";
}

void ExprPrinter::line(const std::string& s) {
  out_ << std::string(static_cast<size_t>(indent_) * 2, ' ') << s << "\n";
}

void ExprPrinter::preamble(const char* flavour, const char* runtime_header, bool cuda) {
  out_ << "// Generated by tessera for kernel '" << f_.name << "'" << flavour << ".\n";
  out_ << "// Specialization:";
  for (const auto& p : f_.params) {
    out_ << " " << p.name << "=";
    if (p.value == ir::kNoValue) {
      out_ << "constexpr";
    } else {
      out_ << f_.type(p.value).str() << (p.divisible_by_16 ? ":16" : "");
    }
  }
  out_ << "\n#include \"" << runtime_header << "\"\n\n";
  // The libraries of tl::extern_elementwise calls, each once, in this backend's language; or,
  // for a library of precompiled objects, a C declaration of each function called and a line
  // naming each file to link (backend/common/link_inputs.h).
  std::vector<std::string> emitted;
  std::vector<std::pair<std::string, std::string>> declared;  // symbol, declaration
  ir::walk(f_.body, [&](const Op* o) {
    const Op& op = *o;
    if (op.kind != OpKind::Extern) return;
    const ir::ExternCall e = ir::unpack_extern(op.text);
    const std::string& src = cuda ? e.cuda_source : e.cpu_source;
    const std::string& objects = cuda ? e.cuda_objects : e.cpu_objects;
    if (src.empty() && objects.empty()) {
      throw CompileError(std::string("kernel '") + f_.name + "': tl::extern_elementwise calls '" +
                             e.symbol + "' of library '" + e.library + "', which has no " +
                             (cuda ? "CUDA" : "CPU (C++)") + " source or objects",
                         op.loc);
    }
    if (!objects.empty()) {
      std::string decl = std::string("extern \"C\" ") + (cuda ? "__device__ " : "") +
                         register_type(f_.type(op.result()).elem) + " " + e.symbol + "(";
      for (size_t i = 0; i < op.operands.size(); ++i)
        decl += (i ? ", " : "") + std::string(register_type(f_.type(op.operands[i]).elem));
      decl += ");";
      auto same = std::find_if(declared.begin(), declared.end(),
                               [&](const auto& d) { return d.first == e.symbol; });
      if (same != declared.end() && same->second != decl) {
        throw CompileError(std::string("kernel '") + f_.name + "': tl::extern_elementwise calls '" +
                               e.symbol + "' of library '" + e.library + "' with two signatures (" +
                               same->second + " and " + decl +
                               "); a C function has one: give each overload its own symbol",
                           op.loc);
      }
      if (same != declared.end()) return;
      declared.emplace_back(e.symbol, decl);
      out_ << "// tl::extern_elementwise library '" << e.library << "' (precompiled)\n";
      for (const LinkInput& in : parse_object_list(objects)) out_ << link_directive(in);
      out_ << decl << "\n\n";
      return;
    }
    const std::string key = e.library + '\x1f' + src;
    if (std::find(emitted.begin(), emitted.end(), key) != emitted.end()) return;
    emitted.push_back(key);
    out_ << "// tl::extern_elementwise library '" << e.library << "'\n" << src << "\n\n";
  });
}

void ExprPrinter::declare_params(const char* debug_type, bool aligned) {
  if (checked_) {
    line(std::string(debug_type) + "* const _dbg = (" + debug_type + "*)_a[" +
         std::to_string(f_.params.size()) + "].p;");
  }
  for (size_t i = 0; i < f_.params.size(); ++i) {
    const auto& p = f_.params[i];
    if (p.value == ir::kNoValue) continue;
    const Type& t = f_.type(p.value);
    const std::string ty = type_str(t), slot = "_a[" + std::to_string(i) + "]";
    std::string src;
    if (t.ptr) {
      src = aligned && p.divisible_by_16
                ? "(" + ty + ")__builtin_assume_aligned(" + slot + ".p, 16)"
                : "(" + ty + ")" + slot + ".p";
    } else {
      src = "(" + ty + ")" + slot + (t.is_float() ? ".f" : ".i");
    }
    line(ty + " const " + name(p.value) + " = " + src + ";  // " + p.name);
  }
}

std::string ExprPrinter::uniform_expr(const ir::AffineInfo& a, int32_t node) const {
  const ir::UniformNode& n = a.node(node);
  switch (n.kind) {
    case ir::UniformNode::Kind::Constant:
      return int_literal(n.constant, DType::Int64);
    case ir::UniformNode::Kind::Value:
      return "(int64_t)" + name(n.value);
    case ir::UniformNode::Kind::Add:
      return "(" + uniform_expr(a, n.a) + " + " + uniform_expr(a, n.b) + ")";
    case ir::UniformNode::Kind::Sub:
      return "(" + uniform_expr(a, n.a) + " - " + uniform_expr(a, n.b) + ")";
    case ir::UniformNode::Kind::Mul:
      return "(" + uniform_expr(a, n.a) + " * " + uniform_expr(a, n.b) + ")";
    case ir::UniformNode::Kind::Rem:
      return "trt::irem<int64_t>(" + uniform_expr(a, n.a) + ", " + uniform_expr(a, n.b) + ")";
  }
  return "0";
}

std::string ExprPrinter::offset_expr(ValueId v, const Index& idx) {
  const Type& t = f_.type(v);
  const bool narrow_signed =
      is_signed(t.elem) && !is_floating_point(t.elem) && t.elem != DType::Int64;
  const Op* op = f_.def(v);
  if (narrow_signed && op && storage(v) == Storage::Inline) {
    switch (op->kind) {
      case OpKind::Constant:
        return int_literal(op->ival, DType::Int64);
      case OpKind::Arange:
        return "((int64_t)" + std::to_string(op->ival) + " + " + idx.at(0) + ")";
      case OpKind::Splat:
        return offset_expr(op->operands[0], {});
      case OpKind::Broadcast:
      case OpKind::ExpandDims:
        return offset_expr(op->operands[0], source_index(*op, idx));
      case OpKind::Binary: {
        const auto k = static_cast<ir::BinaryKind>(op->sub);
        const char* sym = k == ir::BinaryKind::Add   ? " + "
                          : k == ir::BinaryKind::Sub ? " - "
                          : k == ir::BinaryKind::Mul ? " * "
                                                     : nullptr;
        if (sym)
          return "(" + offset_expr(op->operands[0], idx) + sym + offset_expr(op->operands[1], idx) +
                 ")";
        if (k == ir::BinaryKind::Rem && rem_is_identity(*op, idx)) {
          const std::string shift = rem_shift(*op, idx);
          const std::string x = offset_expr(op->operands[0], idx);
          return shift.empty() ? x : "(" + x + " - " + shift + ")";
        }
        break;
      }
      default:
        break;
    }
  }
  return "(int64_t)(" + expr(v, idx) + ")";
}

std::string atomic_call(const ir::Function& f, const Op& op, const std::string& p,
                        const std::string& v, const std::string& c, const std::string& nv) {
  const DType d = f.type(op.operands[0]).elem;
  const std::string st = storage_type(d);
  const std::string order = std::to_string(op.ival);
  const std::string kind = std::to_string(op.sub);
  if (op.kind == OpKind::AtomicCas) {
    if (d == DType::Float32) {
      return "trt::u2f(trt::atomic_cas_bits((uint32_t*)" + p + ", trt::f2u(" + c + "), trt::f2u(" +
             nv + "), " + order + "))";
    }
    if (d == DType::Float64) {
      return "trt::u2d(trt::atomic_cas_bits((uint64_t*)" + p + ", trt::d2u(" + c + "), trt::d2u(" +
             nv + "), " + order + "))";
    }
    if (d == DType::Float16 || d == DType::BFloat16) {
      const std::string to = d == DType::Float16 ? "trt::float_to_half" : "trt::float_to_bf16";
      const std::string from = d == DType::Float16 ? "trt::half_to_float" : "trt::bf16_to_float";
      return from + "(trt::atomic_cas_bits(" + p + ", " + to + "(" + c + "), " + to + "(" + nv +
             "), " + order + "))";
    }
    return "trt::atomic_cas_bits(" + p + ", (" + st + ")(" + c + "), (" + st + ")(" + nv + "), " +
           order + ")";
  }
  if (d == DType::Float32)
    return "trt::atomic_f32(" + kind + ", " + p + ", " + v + ", " + order + ")";
  if (d == DType::Float64)
    return "trt::atomic_f64(" + kind + ", " + p + ", " + v + ", " + order + ")";
  if (d == DType::Float16 || d == DType::BFloat16) {
    return "trt::atomic_f16(" + kind + ", " + p + ", " + v + ", " + order + ", " +
           (d == DType::BFloat16 ? "true" : "false") + ")";
  }
  return "trt::atomic_int<" + st + ">(" + kind + ", " + p + ", (" + st + ")(" + v + "), " + order +
         ")";
}

PrintFormat print_format(const ir::Function& f, const Op& op, size_t k) {
  PrintFormat pf;
  for (char ch : op.text) {
    if (ch == '"' || ch == '\\') pf.prefix += '\\';
    if (ch == '%') pf.prefix += '%';
    pf.prefix += ch;
  }
  const Type& t = f.type(op.operands[k]);
  const bool fl = t.is_float();
  const bool sgn = is_signed(t.elem) || t.elem == DType::Bool;
  pf.conversion = fl ? "%.9g" : (sgn ? "%lld" : "%llu");
  pf.cast = fl ? "(double)(" : (sgn ? "(long long)(" : "(unsigned long long)(");
  pf.label = op.operands.size() > 1 ? " (operand " + std::to_string(k) + ")" : "";
  return pf;
}

}  // namespace tessera::backend::cfamily
