#include "ir/ir.h"

#include "ir/builder.h"
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
  const std::string* parts[] = {&e.library,     &e.symbol,      &e.cpu_source,
                                &e.cuda_source, &e.cpu_objects, &e.cuda_objects};
  std::string text;
  for (const std::string* part : parts) {
    TS_CHECK(part->find('\x1f') == std::string::npos, CompileError)
        << "an extern library's name, function, sources and object paths may not contain the "
           "character 0x1f";
    if (part != parts[0]) text += '\x1f';
    text += *part;
  }
  return text;
}

ExternCall unpack_extern(const std::string& text) {
  ExternCall e;
  std::string* parts[] = {&e.library,     &e.symbol,      &e.cpu_source,
                          &e.cuda_source, &e.cpu_objects, &e.cuda_objects};
  // Four parts (sources only, as IR text written before objects could be linked) or six.
  size_t at = 0, k = 0;
  for (; k < 6 && at <= text.size(); ++k) {
    const size_t end = std::min(text.find('\x1f', at), text.size());
    *parts[k] = text.substr(at, end - at);
    at = end + 1;
  }
  TS_CHECK((k == 4 || k == 6) && at > text.size(), CompileError)
      << "a malformed extern op text (" << k << " parts, not 4 or 6)";
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
    if (!f_.body.ops.empty() && f_.body.ops.back()->kind == OpKind::Yield)
      fail(*f_.body.ops.back(), "yield outside a loop or branch");
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
    for (const Region& r : o.regions) {
      if (r.ops.empty() || r.ops.back()->kind != OpKind::Yield) fail(o, "region without yield");
    }
    const size_t want = expected_results(o);
    if (want != kAnyCount && o.results.size() != want)
      fail(o, std::to_string(o.results.size()) + " results (has " + std::to_string(want) + ")");
    for (ValueId r : o.results) value_type(o, t(r));
    for (const Region& r : o.regions)
      for (ValueId a : r.args) value_type(o, t(a));
    auto same_elem = [&](const Type& a, const Type& b) {
      return a.elem == b.elem && a.ptr == b.ptr;
    };
    auto axis_below = [&](int64_t axis, int64_t n) {
      if (axis < 0 || axis >= n) fail(o, "axis " + std::to_string(axis) + " out of range");
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
        if (const auto n = std::count(o.text.begin(), o.text.end(), '\x1f'); n != 3 && n != 5)
          fail(o, "malformed text");
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
      case OpKind::If: {
        if (!t(o.operands.at(0)).is_bool() || !t(o.operands[0]).is_scalar()) {
          fail(o, "if needs a scalar i1 condition and two regions");
        }
        for (const Region& r : o.regions) {
          if (!r.args.empty()) fail(o, "if's regions take no arguments");
          const Op& y = *r.ops.back();
          if (y.operands.size() != o.results.size()) fail(o, "if's yield count");
          for (size_t i = 0; i < y.operands.size(); ++i) {
            if (t(y.operands[i]) != t(o.results[i])) fail(o, "if's yielded types differ");
          }
        }
        break;
      }
      case OpKind::Constant: {
        const Type& r = t(o.result());
        if (r.ptr) fail(o, "a pointer constant");
        if (!r.is_float() && o.ival != eval::wrap_int(o.ival, r.elem))
          fail(o, std::to_string(o.ival) + " is not a value of " + r.str());
        break;
      }
      case OpKind::ProgramId:
      case OpKind::NumPrograms:
        if (t(o.result()) != Type::scalar(DType::Int32)) fail(o, "result must be i32");
        if (o.ival < 0 || o.ival > 2) fail(o, "axis must be 0, 1 or 2");
        break;
      case OpKind::Arange:
        if (o.ival < INT32_MIN || o.ival2 > INT32_MAX || o.ival2 <= o.ival ||
            o.ival2 - o.ival > kMaxTileElements ||
            t(o.result()) != Type::scalar(DType::Int32).with_shape({o.ival2 - o.ival})) {
          fail(o, "arange's result must be <end - start x i32>, end > start");
        }
        break;
      case OpKind::Splat:
        if (!t(o.operands[0]).is_scalar() || !t(o.result()).is_block() ||
            !same_elem(t(o.operands[0]), t(o.result()))) {
          fail(o, "splat takes a scalar to a block of its type");
        }
        break;
      case OpKind::Broadcast: {
        const Type &a = t(o.operands[0]), &r = t(o.result());
        bool ok = same_elem(a, r) && a.rank() == r.rank() && a.is_block();
        for (size_t d = 0; ok && d < a.shape.size(); ++d)
          ok = a.shape[d] == r.shape[d] || a.shape[d] == 1;
        if (!ok) fail(o, "broadcast stretches size-1 dims of a block of the same rank and type");
        break;
      }
      case OpKind::ExpandDims: {
        const Type& a = t(o.operands[0]);
        if (o.ival < 0 || o.ival > a.rank()) fail(o, "axis out of range");
        Type want_t = a;
        want_t.shape.insert(want_t.shape.begin() + o.ival, 1);
        if (t(o.result()) != want_t) fail(o, "result must be the operand with a size-1 dim");
        break;
      }
      case OpKind::Cast:
        if (t(o.operands[0]).shape != t(o.result()).shape || t(o.operands[0]).ptr ||
            t(o.result()).ptr) {
          fail(o, "cast converts the elements of a non-pointer value, shape kept");
        }
        break;
      case OpKind::Bitcast: {
        const Type &a = t(o.operands[0]), &r = t(o.result());
        // Between values of one width, or a pointer and a pointer or an int64 address.
        auto address = [](const Type& x) {
          return x.ptr || x.elem == DType::Int64 || x.elem == DType::UInt64;
        };
        const bool ok =
            a.ptr || r.ptr ? address(a) && address(r) : itemsize(a.elem) == itemsize(r.elem);
        if (a.shape != r.shape || !ok) fail(o, "bitcast keeps the shape and the element width");
        break;
      }
      case OpKind::Permute: {
        const Type &a = t(o.operands[0]), &r = t(o.result());
        if (!same_elem(a, r) || a.rank() != r.rank() || a.rank() > 15 || o.ival < 0)
          fail(o, "permute's result has the operand's type and rank");
        uint32_t seen = 0;
        for (int64_t d = 0; d < a.rank(); ++d) {
          const int64_t from = (o.ival >> (4 * d)) & 15;
          if (from >= a.rank() || (seen & (1u << from)) || r.shape[d] != a.shape[from])
            fail(o, "not a permutation of the operand's dims");
          seen |= 1u << from;
        }
        if ((o.ival >> (4 * a.rank())) != 0) fail(o, "not a permutation of the operand's dims");
        break;
      }
      case OpKind::Reshape:
        if (!same_elem(t(o.operands[0]), t(o.result())) ||
            t(o.operands[0]).numel() != t(o.result()).numel()) {
          fail(o, "reshape keeps the type and the element count");
        }
        break;
      case OpKind::Join: {
        Type want_t = t(o.operands[0]);
        want_t.shape.push_back(2);
        if (t(o.operands[1]) != t(o.operands[0]) || t(o.result()) != want_t)
          fail(o, "join takes two values of one type to that type with a last dim of 2");
        break;
      }
      case OpKind::Extract: {
        const Type& a = t(o.operands[0]);
        if (a.rank() < 1 || a.shape.back() != 2 || (o.ival != 0 && o.ival != 1))
          fail(o, "extract takes element 0 or 1 of a last dim of 2");
        Type want_t = a;
        want_t.shape.pop_back();
        if (t(o.result()) != want_t) fail(o, "extract's result drops the last dim");
        break;
      }
      case OpKind::Cat: {
        Type want_t = t(o.operands[0]);
        if (want_t.rank() < 1 || t(o.operands[1]) != want_t)
          fail(o, "cat of two blocks of one type");
        want_t.shape[0] *= 2;
        if (t(o.result()) != want_t) fail(o, "cat's result doubles dim 0");
        break;
      }
      case OpKind::Flip:
        axis_below(o.ival, t(o.operands[0]).rank());
        if (t(o.result()) != t(o.operands[0])) fail(o, "flip keeps the type");
        break;
      case OpKind::Gather: {
        const Type &src = t(o.operands[0]), &idx = t(o.operands[1]);
        if (!idx.is_int() || src.rank() != idx.rank() || src.rank() < 1 ||
            t(o.result()) != src.with_shape(idx.shape)) {
          fail(o, "gather takes a block and integer indices of its rank to the indices' shape");
        }
        axis_below(o.ival, src.rank());
        break;
      }
      case OpKind::Reduce: {
        sub_below(num_reduce_kinds());
        const Type& a = t(o.operands[0]);
        if (a.ptr || a.rank() < 1) fail(o, "reduce of a pointer or a scalar");
        axis_below(o.ival, a.rank());
        const ReduceTraits& rt = reduce_traits(static_cast<ReduceKind>(o.sub));
        if (a.is_float() && rt.combine == BinaryKind::Xor) fail(o, "xor of floats");
        Type want_t = rt.index ? Type::scalar(DType::Int32).with_shape(a.shape) : a;
        want_t.shape.erase(want_t.shape.begin() + o.ival);
        if (t(o.result()) != want_t) fail(o, "the result drops the axis");
        break;
      }
      case OpKind::ReduceFn:
      case OpKind::ScanFn: {
        const size_t n = o.operands.size();
        const Region& body = o.regions[0];
        const Type& a0 = t(o.operands[0]);
        if (a0.rank() < 1 || body.args.size() != 2 * n || o.results.size() != n ||
            body.ops.back()->operands.size() != n || (o.kind == OpKind::ScanFn && o.sub > 1)) {
          fail(o, "a combine function's operands, arguments and results do not line up");
        }
        axis_below(o.ival, a0.rank());
        for (size_t i = 0; i < n; ++i) {
          const Type& a = t(o.operands[i]);
          Type res = a;
          if (o.kind == OpKind::ReduceFn) res.shape.erase(res.shape.begin() + o.ival);
          if (a.shape != a0.shape || a.ptr || t(body.args[i]) != a.scalar_type() ||
              t(body.args[n + i]) != a.scalar_type() ||
              t(body.ops.back()->operands[i]) != a.scalar_type() || t(o.results[i]) != res) {
            fail(o, "a combine function's types do not line up");
          }
        }
        break;
      }
      case OpKind::Assert:
        if (!t(o.operands[0]).is_bool()) fail(o, "the condition must be i1");
        break;
      default:
        break;
    }
    switch (o.kind) {  // operands beyond the ones checked above
      case OpKind::Load: {
        const Type& p = t(o.operands[0]);
        Type want_t = p;
        want_t.ptr = false;
        if (t(o.result()) != want_t) fail(o, "a load's result has the pointee type and shape");
        if (o.operands.size() > 1 && !t(o.operands[1]).is_bool()) fail(o, "the mask must be i1");
        if (o.operands.size() > 2 && t(o.operands[2]) != want_t) fail(o, "other's type");
        break;
      }
      case OpKind::Store:
        if (o.operands.size() > 2 &&
            (!t(o.operands[2]).is_bool() || t(o.operands[2]).shape != t(o.operands[0]).shape)) {
          fail(o, "the mask must be i1 of the pointer's shape");
        }
        break;
      case OpKind::Atomic:
        if (o.sub >= 7 || o.ival < 0 || o.ival > 3) fail(o, "atomic kind or memory order");
        if (o.operands.size() > 2 &&
            (!t(o.operands[2]).is_bool() || t(o.operands[2]).shape != t(o.operands[0]).shape)) {
          fail(o, "the mask must be i1 of the pointer's shape");
        }
        break;
      case OpKind::AtomicCas:
        if (o.ival < 0 || o.ival > 3 || t(o.operands[2]) != t(o.operands[1]))
          fail(o, "memory order or the compared and new values' types");
        break;
      case OpKind::AddPtr:
        if (t(o.result()) != t(o.operands[0])) fail(o, "addptr's result has the pointer's type");
        break;
      case OpKind::Compare:
        sub_below(num_cmp_kinds());
        break;
      case OpKind::Dot:
        sub_below(3);
        break;
      case OpKind::For: {
        const Region& body = o.regions[0];
        const Type& lb = t(o.operands[0]);
        if (!lb.is_int() || !lb.is_scalar() || t(o.operands[1]) != lb || t(o.operands[2]) != lb ||
            t(body.args[0]) != lb) {
          fail(o, "for's bounds, step and induction variable are scalar integers of one type");
        }
        for (size_t i = 0; i < o.results.size(); ++i) {
          if (t(body.args[i + 1]) != t(o.results[i])) fail(o, "for's carried types differ");
        }
        break;
      }
      case OpKind::While: {
        const Region &cond = o.regions[0], &body = o.regions[1];
        for (size_t i = 0; i < o.operands.size(); ++i) {
          const Type& c = t(o.operands[i]);
          if (t(cond.args[i]) != c || t(body.args[i]) != c || t(o.results[i]) != c ||
              t(body.ops.back()->operands[i]) != c) {
            fail(o, "while's carried types differ");
          }
        }
        break;
      }
      default:
        break;
    }
  }

  static constexpr size_t kAnyCount = ~size_t{0};
  // How many results an op has (the carried values' count for loops, checked with them).
  static size_t expected_results(const Op& o) {
    switch (o.kind) {
      case OpKind::Store:
      case OpKind::Yield:
      case OpKind::Assert:
      case OpKind::Print:
        return 0;
      case OpKind::For:
      case OpKind::While:
      case OpKind::If:
      case OpKind::ReduceFn:
      case OpKind::ScanFn:
        return kAnyCount;
      default:
        return 1;
    }
  }

  // Every value's type: dims of at least 1; in parsed text, tiles Triton would accept too.
  void value_type(const Op& o, const Type& ty) {
    int64_t numel = 1;
    for (int64_t d : ty.shape) {
      if (d < 1) fail(o, "a dim of " + std::to_string(d) + " in " + ty.str());
      numel = d > (int64_t{1} << 40) / numel ? (int64_t{1} << 40) : numel * d;
    }
    if (user_text_ && (ty.rank() > 8 || numel > kMaxTileElements))
      fail(o, ty.str() + " is larger than a tile may be (2^20 elements, 8 dims)");
  }

  static constexpr int64_t kMaxTileElements = int64_t{1} << 20;

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
