#include "ir/ir.h"

#include "ir/op_traits.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

namespace tessera::ir {

int64_t Type::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

const char* elem_name(DType d) {
  switch (d) {
    case DType::Bool:
      return "i1";
    case DType::Int8:
      return "i8";
    case DType::Int16:
      return "i16";
    case DType::Int32:
      return "i32";
    case DType::Int64:
      return "i64";
    case DType::UInt8:
      return "u8";
    case DType::UInt16:
      return "u16";
    case DType::UInt32:
      return "u32";
    case DType::UInt64:
      return "u64";
    case DType::Float16:
      return "fp16";
    case DType::BFloat16:
      return "bf16";
    case DType::Float32:
      return "fp32";
    case DType::Float64:
      return "fp64";
    case DType::Float8_e4m3fn:
      return "fp8e4nv";
    case DType::Float8_e5m2:
      return "fp8e5";
  }
  return "?";
}

std::string Type::str() const {
  std::string e = std::string(ptr ? "*" : "") + elem_name(elem);
  if (shape.empty()) return e;
  std::string s = "<";
  for (size_t i = 0; i < shape.size(); ++i) s += std::to_string(shape[i]) + "x";
  return s + " " + e + ">";
}

std::string pack_extern(const ExternCall& e) {
  for (const std::string* part : {&e.library, &e.symbol, &e.cpu_source, &e.cuda_source}) {
    TS_CHECK(part->find('\x1f') == std::string::npos, CompileError)
        << "an extern library's name, function and sources may not contain the character 0x1f";
  }
  return e.library + '\x1f' + e.symbol + '\x1f' + e.cpu_source + '\x1f' + e.cuda_source;
}

ExternCall unpack_extern(const std::string& text) {
  ExternCall e;
  std::string* parts[] = {&e.library, &e.symbol, &e.cpu_source, &e.cuda_source};
  size_t at = 0;
  for (size_t k = 0; k < 4; ++k) {
    const size_t end = k == 3 ? std::string::npos : text.find('\x1f', at);
    TS_CHECK(k == 3 || end != std::string::npos, CompileError)
        << "a malformed extern op text (" << k << " of 4 parts)";
    *parts[k] = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end + 1;
  }
  return e;
}

bool Op::has_side_effects() const {
  if (traits(kind).has(kSideEffects)) return true;
  if (kind == OpKind::Extern && sub == 1) return true;  // an impure user function
  for (const auto& r : regions) {
    for (const Op* op : r.ops) {
      if (op->has_side_effects()) return true;
    }
  }
  return false;
}

ValueId Function::new_value(Type t, Op* def, std::string name) {
  values_.push_back(ValueInfo{std::move(t), def, std::move(name)});
  return static_cast<ValueId>(values_.size() - 1);
}

Op* Function::new_op(OpKind kind) {
  ops_.push_back(std::make_unique<Op>());
  ops_.back()->kind = kind;
  return ops_.back().get();
}

const Op* Function::constant(ValueId v) const {
  const Op* d = def(v);
  return d && d->kind == OpKind::Constant ? d : nullptr;
}

// ---- verifier -------------------------------------------------------------------------------

namespace {

class Verifier {
 public:
  Verifier(const Function& f, bool user_text) : f_(f), user_text_(user_text) {}

  void run() {
    std::vector<ValueId> params;
    for (const auto& p : f_.params) {
      if (p.value != kNoValue) params.push_back(p.value);
    }
    for (ValueId a : params) defined_.insert(a);
    region(f_.body);
  }

 private:
  [[noreturn]] void fail(const Op& o, const std::string& what) {
    if (user_text_) {
      TS_ERROR(ValueError) << "[ir::parse] kernel '" << f_.name << "' is malformed at "
                           << op_name(o.kind) << ": " << what;
    }
    TS_INTERNAL_ASSERT(false) << "tile IR of kernel '" << f_.name << "' is malformed at "
                              << op_name(o.kind) << " (" << o.loc << "): " << what << "\n"
                              << print(f_);
  }

  // Values defined in a region are visible in it and its nested regions only.
  void region(const Region& r) {
    std::vector<ValueId> added;
    auto define = [&](ValueId v) {
      if (defined_.insert(v).second) added.push_back(v);
    };
    for (ValueId a : r.args) define(a);
    for (size_t i = 0; i < r.ops.size(); ++i) {
      const Op& o = *r.ops[i];
      for (ValueId v : o.operands) {
        if (!defined_.count(v))
          fail(o, "operand %" + std::to_string(v) + " used outside its scope");
      }
      check(o);
      if (o.kind == OpKind::Yield && i + 1 != r.ops.size()) fail(o, "yield is not the last op");
      for (const auto& sub : o.regions) {
        region(sub);
        if (sub.ops.empty() || sub.ops.back()->kind != OpKind::Yield)
          fail(o, "region without yield");
      }
      for (ValueId res : o.results) {
        if (f_.def(res) != &o) fail(o, "result's definition does not point at its op");
        define(res);
      }
    }
    for (ValueId v : added) defined_.erase(v);
  }

  void check(const Op& o) {
    const OpTraits& tr = traits(o.kind);
    const auto n = static_cast<int>(o.operands.size());
    if (n < tr.min_operands || (tr.max_operands >= 0 && n > tr.max_operands)) {
      fail(o, std::to_string(n) + " operands (takes " + std::to_string(tr.min_operands) +
                  (tr.max_operands == tr.min_operands ? ""
                   : tr.max_operands < 0              ? " or more"
                                                      : " to " + std::to_string(tr.max_operands)) +
                  ")");
    }
    if (static_cast<int>(o.regions.size()) != tr.regions)
      fail(o, std::to_string(o.regions.size()) + " regions (takes " + std::to_string(tr.regions) +
                  ")");
    auto t = [&](ValueId v) -> const Type& { return f_.type(v); };
    auto sub_below = [&](int count) {
      if (o.sub >= count) fail(o, "sub-kind " + std::to_string(o.sub) + " out of range");
    };
    switch (o.kind) {
      case OpKind::Binary: {
        sub_below(num_binary_kinds());
        if (t(o.operands[0]) != t(o.operands[1]) || t(o.operands[0]) != t(o.result())) {
          fail(o, "operand and result types differ");
        }
        const BinaryTraits& b = binary_traits(static_cast<BinaryKind>(o.sub));
        if (t(o.result()).is_float() ? !b.floats : !b.ints)
          fail(o, std::string(b.name) + " of " + t(o.result()).str());
        break;
      }
      case OpKind::Unary: {
        sub_below(num_unary_kinds());
        if (t(o.operands[0]) != t(o.result())) fail(o, "operand and result types differ");
        const UnaryTraits& u = unary_traits(static_cast<UnaryKind>(o.sub));
        if (!t(o.result()).is_float() && !u.ints)
          fail(o, std::string(u.name) + " of " + t(o.result()).str());
        break;
      }
      case OpKind::Compare:
        if (t(o.operands[0]) != t(o.operands[1])) fail(o, "operand types differ");
        if (t(o.result()).elem != DType::Bool || t(o.result()).shape != t(o.operands[0]).shape) {
          fail(o, "result must be i1 of the operands' shape");
        }
        break;
      case OpKind::Atomic:
      case OpKind::AtomicCas:
        if (!t(o.operands[0]).ptr || t(o.operands[1]).elem != t(o.operands[0]).elem ||
            t(o.operands[1]).shape != t(o.operands[0]).shape || t(o.result()) != t(o.operands[1])) {
          fail(o, "atomic operand types");
        }
        break;
      case OpKind::While: {
        const Region &cond = o.regions[0], &body = o.regions[1];
        if (cond.args.size() != o.operands.size() || body.args.size() != o.operands.size() ||
            o.results.size() != o.operands.size()) {
          fail(o, "while's carried values do not line up");
        }
        const Op& cy = *cond.ops.back();
        if (cy.operands.size() != 1 || !t(cy.operands[0]).is_bool() ||
            !t(cy.operands[0]).is_scalar()) {
          fail(o, "while's condition must yield one scalar i1");
        }
        if (body.ops.back()->operands.size() != o.results.size()) fail(o, "while's yield count");
        break;
      }
      case OpKind::Dot: {
        const Type &a = t(o.operands[0]), &b = t(o.operands[1]), &c = t(o.operands[2]);
        if (a.rank() != 2 || b.rank() != 2 || c.rank() != 2 || a.shape[1] != b.shape[0] ||
            c.shape[0] != a.shape[0] || c.shape[1] != b.shape[1] || a.elem != b.elem ||
            t(o.result()) != c) {
          fail(o, "dot shapes or types do not match");
        }
        break;
      }
      case OpKind::Fma:
        for (int i = 0; i < 3; ++i) {
          if (t(o.operands[static_cast<size_t>(i)]) != t(o.result()))
            fail(o, "operand types differ from the result");
        }
        if (!t(o.result()).is_float()) fail(o, "fma of a non-float");
        break;
      case OpKind::Select:
        if (t(o.operands[1]) != t(o.operands[2]) || t(o.operands[1]) != t(o.result())) {
          fail(o, "branch types differ");
        }
        if (!t(o.operands[0]).is_bool() || t(o.operands[0]).shape != t(o.result()).shape) {
          fail(o, "condition must be i1 of the result's shape");
        }
        break;
      case OpKind::Extern:
        for (ValueId v : o.operands) {
          if (t(v).shape != t(o.result()).shape || t(v).ptr) fail(o, "operand shape or pointer");
        }
        if (std::count(o.text.begin(), o.text.end(), '\x1f') != 3) fail(o, "malformed text");
        break;
      case OpKind::Load:
        if (!t(o.operands[0]).ptr) fail(o, "load of a non-pointer");
        for (size_t i = 1; i < o.operands.size(); ++i) {
          if (t(o.operands[i]).shape != t(o.operands[0]).shape) fail(o, "mask/other shape");
        }
        break;
      case OpKind::Store:
        if (!t(o.operands[0]).ptr) fail(o, "store to a non-pointer");
        if (t(o.operands[1]).shape != t(o.operands[0]).shape) fail(o, "value shape");
        if (t(o.operands[1]).elem != t(o.operands[0]).elem) fail(o, "value element type");
        break;
      case OpKind::AddPtr:
        if (!t(o.operands[0]).ptr || !t(o.operands[1]).is_int()) fail(o, "addptr needs ptr, int");
        if (t(o.operands[0]).shape != t(o.operands[1]).shape) fail(o, "addptr shapes differ");
        break;
      case OpKind::For: {
        const Region& body = o.regions[0];
        if (body.args.size() != o.operands.size() - 2 ||
            o.results.size() != o.operands.size() - 3) {
          fail(o, "for's carried values do not line up");
        }
        const Op& y = *body.ops.back();
        if (y.operands.size() != o.results.size()) fail(o, "for's yield count");
        for (size_t i = 0; i < o.results.size(); ++i) {
          if (t(y.operands[i]) != t(o.results[i]) || t(o.operands[i + 3]) != t(o.results[i])) {
            fail(o, "for's carried types differ");
          }
        }
        break;
      }
      case OpKind::If:
        if (!t(o.operands.at(0)).is_bool() || !t(o.operands[0]).is_scalar()) {
          fail(o, "if needs a scalar i1 condition and two regions");
        }
        break;
      default:
        break;
    }
  }

  const Function& f_;
  const bool user_text_;
  std::unordered_set<ValueId> defined_;
};

}  // namespace

void verify(const Function& f) {
  Verifier(f, false).run();
}

void verify_parsed(const Function& f) {
  Verifier(f, true).run();
}

}  // namespace tessera::ir
