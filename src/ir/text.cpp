// The tile IR's text form: the printer, the parser and structural equality (text.h).
#include "ir/text.h"

#include "ir/op_traits.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

namespace tessera::ir {
namespace {

// ---- names of sub-kinds and attributes ----------------------------------------------------------

const char* precision_name(DotPrecision p) {
  static constexpr const char* kNames[] = {"tf32", "tf32x3", "ieee"};
  return kNames[static_cast<int>(p)];
}
const char* atomic_name(AtomicKind k) {
  static constexpr const char* kNames[] = {"add", "max", "min", "and", "or", "xor", "xchg"};
  return kNames[static_cast<int>(k)];
}
const char* order_name(MemOrder o) {
  static constexpr const char* kNames[] = {"relaxed", "acquire", "release", "acq_rel"};
  return kNames[static_cast<int>(o)];
}

// The mnemonic of an op: its name, dotted with its sub-kind where it has one.
std::string mnemonic(const Op& o) {
  switch (o.kind) {
    case OpKind::Binary:
      return binary_name(static_cast<BinaryKind>(o.sub));
    case OpKind::Unary:
      return unary_name(static_cast<UnaryKind>(o.sub));
    case OpKind::Compare:
      return std::string("cmp.") + cmp_name(static_cast<CmpKind>(o.sub));
    case OpKind::Reduce:
      return std::string("reduce.") + reduce_name(static_cast<ReduceKind>(o.sub));
    case OpKind::Dot:
      return std::string("dot.") + precision_name(static_cast<DotPrecision>(o.sub));
    case OpKind::Atomic:
      return std::string("atomic.") + atomic_name(static_cast<AtomicKind>(o.sub));
    default:
      return op_name(o.kind);
  }
}

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += c;
    } else if (c == '\n') {
      q += "\\n";
    } else {
      q += c;
    }
  }
  return q + "\"";
}

std::string float_text(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::ostringstream os;
  os.precision(17);
  os << v;
  std::string s = os.str();
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// ---- the printer
// ----------------------------------------------------------------------------------

class Printer {
 public:
  Printer(const Function& f, bool attributes) : f_(f), attributes_(attributes) {}

  std::string run() {
    for (const auto& p : f_.params) {
      if (p.value != kNoValue) number(p.value);
    }
    os_ << "kernel @" << f_.name << "(";
    bool first = true;
    for (const auto& p : f_.params) {
      os_ << (first ? "" : ", ");
      first = false;
      if (p.value == kNoValue) {
        os_ << p.name << ": "
            << (p.kind == ParamKind::Constexpr ? "constexpr"
                : p.kind == ParamKind::Int     ? "int"
                : p.kind == ParamKind::Float   ? "float"
                                               : "ptr");
        continue;
      }
      os_ << v(p.value) << ": " << f_.type(p.value).str() << " " << p.name;
      if (p.divisible_by_16) os_ << " {div16}";
    }
    os_ << ")";
    if (attributes_) {
      os_ << " attributes {num_warps = " << f_.attrs.num_warps
          << ", num_stages = " << f_.attrs.num_stages;
      if (f_.attrs.maxnreg) os_ << ", maxnreg = " << f_.attrs.maxnreg;
      if (!f_.attrs.target.empty()) os_ << ", target = " << quoted(f_.attrs.target);
      os_ << "}";
    }
    os_ << " {\n";
    region_ops(f_.body, 1);
    os_ << "}\n";
    return os_.str();
  }

 private:
  void number(ValueId id) { ids_.emplace(id, static_cast<int>(ids_.size())); }
  std::string v(ValueId id) const {
    auto it = ids_.find(id);
    return it == ids_.end() ? "%?" + std::to_string(id) : "%" + std::to_string(it->second);
  }
  std::string typed(ValueId id) const { return v(id) + ": " + f_.type(id).str(); }

  void region_ops(const Region& r, int depth) {
    for (const Op* op : r.ops) this->op(*op, depth);
  }
  // A region after its opening line: the arguments (when it has any, for the generic form), ops.
  void region_body(const Region& r, int depth, bool args_line) {
    const std::string pad(static_cast<size_t>(depth) * 2, ' ');
    if (args_line && !r.args.empty()) {
      for (ValueId a : r.args) number(a);
      os_ << pad << "^(";
      for (size_t i = 0; i < r.args.size(); ++i) os_ << (i ? ", " : "") << typed(r.args[i]);
      os_ << "):\n";
    }
    region_ops(r, depth);
  }

  std::string operands(const Op& o, size_t from = 0) const {
    std::string s;
    for (size_t i = from; i < o.operands.size(); ++i)
      s += (i > from ? ", " : "") + v(o.operands[i]);
    return s;
  }

  std::string attrs(const Op& o) const {
    std::vector<std::string> a;
    switch (o.kind) {
      case OpKind::ProgramId:
      case OpKind::NumPrograms:
      case OpKind::ExpandDims:
      case OpKind::Flip:
      case OpKind::Gather:
      case OpKind::Reduce:
      case OpKind::ReduceFn:
        a.push_back("axis = " + std::to_string(o.ival));
        break;
      case OpKind::ScanFn:
        a.push_back("axis = " + std::to_string(o.ival));
        if (o.sub) a.push_back("reverse = 1");
        break;
      case OpKind::Arange:
        a.push_back("start = " + std::to_string(o.ival));
        a.push_back("end = " + std::to_string(o.ival2));
        break;
      case OpKind::Atomic:
      case OpKind::AtomicCas:
        a.push_back(std::string("sem = ") + order_name(static_cast<MemOrder>(o.ival)));
        break;
      case OpKind::Permute: {
        std::string p = "perm = [";
        const int64_t rank = f_.type(o.result()).rank();
        for (int64_t d = 0; d < rank; ++d)
          p += (d ? ", " : "") + std::to_string((o.ival >> (4 * d)) & 15);
        a.push_back(p + "]");
        break;
      }
      case OpKind::Extract:
        a.push_back("index = " + std::to_string(o.ival));
        break;
      case OpKind::Assert:
      case OpKind::Print:
      case OpKind::Extern:
        a.push_back("text = " + quoted(o.text));
        if (o.kind == OpKind::Assert && o.sub) a.push_back("hint = 1");
        if (o.kind == OpKind::Extern && o.sub) a.push_back("impure = 1");
        break;
      default:
        break;
    }
    std::string s;
    for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
    return s.empty() ? "" : " {" + s + "}";
  }

  std::string result_types(const Op& o) const {
    if (o.results.empty()) return "";
    if (o.results.size() == 1 && o.kind != OpKind::For && o.kind != OpKind::If &&
        o.kind != OpKind::While && o.kind != OpKind::ReduceFn && o.kind != OpKind::ScanFn)
      return " : " + f_.type(o.result()).str();
    std::string s = " : (";
    for (size_t i = 0; i < o.results.size(); ++i)
      s += (i ? ", " : "") + f_.type(o.results[i]).str();
    return s + ")";
  }

  std::string loc(const Op& o) const {
    if (!o.loc.known()) return "";
    std::ostringstream os;
    os << "  // " << o.loc;
    return os.str();
  }

  void op(const Op& o, int depth) {
    const std::string pad(static_cast<size_t>(depth) * 2, ' ');
    for (ValueId r : o.results) number(r);
    os_ << pad;
    if (!o.results.empty()) {
      for (size_t i = 0; i < o.results.size(); ++i) os_ << (i ? ", " : "") << v(o.results[i]);
      os_ << " = ";
    }
    switch (o.kind) {
      case OpKind::Constant:
        os_ << "const "
            << (f_.type(o.result()).is_float() ? float_text(o.fval) : std::to_string(o.ival))
            << result_types(o) << loc(o) << "\n";
        return;
      case OpKind::For: {
        const Region& body = o.regions[0];
        for (ValueId a : body.args) number(a);
        os_ << "for " << typed(body.args[0]) << " = " << v(o.operands[0]) << " to "
            << v(o.operands[1]) << " step " << v(o.operands[2]);
        if (o.operands.size() > 3) {
          os_ << " iter_args(";
          for (size_t i = 3; i < o.operands.size(); ++i)
            os_ << (i > 3 ? ", " : "") << typed(body.args[i - 2]) << " = " << v(o.operands[i]);
          os_ << ")";
        }
        if (o.ival) {
          const LoopOptions lo = LoopOptions::unpack(o.ival);
          std::vector<std::string> a;
          if (lo.num_stages) a.push_back("num_stages = " + std::to_string(lo.num_stages));
          if (lo.loop_unroll_factor)
            a.push_back("loop_unroll_factor = " + std::to_string(lo.loop_unroll_factor));
          if (lo.flatten) a.push_back("flatten = 1");
          if (lo.warp_specialize) a.push_back("warp_specialize = 1");
          if (lo.disallow_acc_multi_buffer) a.push_back("disallow_acc_multi_buffer = 1");
          os_ << " attributes {";
          for (size_t i = 0; i < a.size(); ++i) os_ << (i ? ", " : "") << a[i];
          os_ << "}";
        }
        os_ << result_types(o) << " {" << loc(o) << "\n";
        region_ops(body, depth + 1);
        os_ << pad << "}\n";
        return;
      }
      case OpKind::If:
        os_ << "if " << v(o.operands[0]) << result_types(o) << " {" << loc(o) << "\n";
        region_ops(o.regions[0], depth + 1);
        os_ << pad << "} else {\n";
        region_ops(o.regions[1], depth + 1);
        os_ << pad << "}\n";
        return;
      case OpKind::While:
      case OpKind::ReduceFn:
      case OpKind::ScanFn: {
        os_ << mnemonic(o);
        if (!o.operands.empty()) os_ << " " << operands(o);
        os_ << attrs(o) << result_types(o) << " {" << loc(o) << "\n";
        for (size_t r = 0; r < o.regions.size(); ++r) {
          if (r) os_ << pad << "} do {\n";
          region_body(o.regions[r], depth + 1, true);
        }
        os_ << pad << "}\n";
        return;
      }
      default:
        os_ << mnemonic(o);
        if (!o.operands.empty()) os_ << " " << operands(o);
        os_ << attrs(o) << result_types(o) << loc(o) << "\n";
        return;
    }
  }

  const Function& f_;
  bool attributes_;
  std::unordered_map<ValueId, int> ids_;
  std::ostringstream os_;
};

// ---- the parser
// -----------------------------------------------------------------------------------

// Source files named by parsed locations live as long as the process (SourceLoc holds a pointer).
const char* intern(const std::string& s) {
  static std::mutex m;
  static auto* names = new std::set<std::string>();
  std::lock_guard<std::mutex> g(m);
  return names->insert(s).first->c_str();
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::unique_ptr<Function> run() {
    f_ = std::make_unique<Function>();
    line_ = next_line();
    expect_word("kernel");
    expect('@');
    f_->name = identifier();
    params();
    if (accept_word("attributes")) function_attributes();
    expect('{');
    expect_end_of_line();
    ops_until_close(f_->body);
    skip_space();
    if (pos_ != line_.size()) fail("text after the function's closing brace");
    while (!done()) {
      line_ = next_line();
      skip_space();
      if (pos_ != line_.size()) fail("text after the function");
    }
    verify_parsed(*f_);
    return std::move(f_);
  }

 private:
  // ---- lines and characters
  bool done() const { return next_ >= text_.size(); }
  std::string_view next_line() {
    ++line_no_;
    pos_ = 0;
    if (done()) return {};
    const size_t end = text_.find('\n', next_);
    std::string_view l =
        text_.substr(next_, end == std::string_view::npos ? std::string_view::npos : end - next_);
    next_ = end == std::string_view::npos ? text_.size() : end + 1;
    return l;
  }
  [[noreturn]] void fail(const std::string& what) const {
    TS_ERROR(ValueError) << "[ir::parse] line " << line_no_ << ", column " << pos_ + 1 << ": "
                         << what << "\n  " << line_;
  }
  void skip_space() {
    while (pos_ < line_.size() &&
           (line_[pos_] == ' ' || line_[pos_] == '\t' || line_[pos_] == '\r'))
      ++pos_;
  }
  bool at_comment() {
    skip_space();
    return line_.substr(pos_, 2) == "//";
  }
  char peek() {
    skip_space();
    return pos_ < line_.size() ? line_[pos_] : '\0';
  }
  bool accept(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  std::string word() {
    skip_space();
    const size_t b = pos_;
    while (pos_ < line_.size() && (std::isalnum(static_cast<unsigned char>(line_[pos_])) ||
                                   line_[pos_] == '_' || line_[pos_] == '.'))
      ++pos_;
    return std::string(line_.substr(b, pos_ - b));
  }
  std::string identifier() {
    std::string w = word();
    if (w.empty()) fail("expected a name");
    return w;
  }
  bool accept_word(std::string_view w) {
    skip_space();
    const size_t save = pos_;
    if (word() == w) return true;
    pos_ = save;
    return false;
  }
  void expect_word(std::string_view w) {
    if (!accept_word(w)) fail("expected '" + std::string(w) + "'");
  }
  int64_t integer() {
    skip_space();
    const size_t b = pos_;
    if (pos_ < line_.size() && (line_[pos_] == '-' || line_[pos_] == '+')) ++pos_;
    while (pos_ < line_.size() && std::isdigit(static_cast<unsigned char>(line_[pos_]))) ++pos_;
    if (pos_ == b) fail("expected an integer");
    return std::strtoll(std::string(line_.substr(b, pos_ - b)).c_str(), nullptr, 10);
  }
  std::string string_literal() {
    expect('"');
    std::string s;
    while (pos_ < line_.size() && line_[pos_] != '"') {
      char c = line_[pos_++];
      if (c == '\\' && pos_ < line_.size()) {
        c = line_[pos_++];
        if (c == 'n') c = '\n';
      }
      s += c;
    }
    if (pos_ >= line_.size()) fail("unterminated string");
    ++pos_;
    return s;
  }
  // `// file:line` at the end of a line (optional), then nothing.
  SourceLoc location() {
    SourceLoc loc;
    if (at_comment()) {
      pos_ += 2;
      skip_space();
      // What `print` writes: the file's base name, ':', a positive line number. Other comments
      // (hand-written notes) leave the location unknown.
      std::string_view rest = line_.substr(pos_);
      while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.back())))
        rest.remove_suffix(1);
      const size_t colon = rest.rfind(':');
      if (colon != std::string_view::npos) {
        std::string_view file = rest.substr(0, colon);
        const std::string_view digits = rest.substr(colon + 1);
        if (const size_t slash = file.rfind('/'); slash != std::string_view::npos)
          file.remove_prefix(slash + 1);
        while (!file.empty() && file.front() == ' ') file.remove_prefix(1);
        const bool printable = std::all_of(file.begin(), file.end(), [](char c) {
          return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
        });
        int64_t line = 0;
        bool number = !digits.empty() && digits.size() <= 9;
        for (size_t i = 0; number && i < digits.size(); ++i) {
          number = std::isdigit(static_cast<unsigned char>(digits[i])) != 0;
          line = line * 10 + (digits[i] - '0');
        }
        if (!file.empty() && printable && number && line > 0) {
          loc.file = intern(std::string(file));
          loc.line = static_cast<int>(line);
        }
      }
      pos_ = line_.size();
    }
    return loc;
  }
  void expect_end_of_line() {
    location();
    skip_space();
    if (pos_ != line_.size()) fail("unexpected text");
  }

  // ---- types and values
  Type type() {
    skip_space();
    Type t;
    if (accept('<')) {
      for (;;) {
        t.shape.push_back(integer());
        if (!accept('x')) fail("expected 'x' in a block type");
        if (peek() == '*' || std::isalpha(static_cast<unsigned char>(peek()))) break;
      }
    }
    t.ptr = accept('*');
    const std::string e = word();
    bool found = false;
    for (DType d :
         {DType::Bool, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8,
          DType::UInt16, DType::UInt32, DType::UInt64, DType::Float16, DType::BFloat16,
          DType::Float32, DType::Float64, DType::Float8_e4m3fn, DType::Float8_e5m2}) {
      if (e == elem_name(d)) {
        t.elem = d;
        found = true;
      }
    }
    if (!found) fail("unknown element type '" + e + "'");
    if (!t.shape.empty()) expect('>');
    return t;
  }
  std::vector<Type> result_types() {
    std::vector<Type> out;
    if (!accept(':')) return out;
    if (accept('(')) {
      if (!accept(')')) {
        do {
          out.push_back(type());
        } while (accept(','));
        expect(')');
      }
    } else {
      out.push_back(type());
    }
    return out;
  }
  int value_ref() {
    expect('%');
    return static_cast<int>(integer());
  }
  ValueId use() {
    const int id = value_ref();
    auto it = values_.find(id);
    if (it == values_.end()) fail("%" + std::to_string(id) + " is not defined before its use");
    return it->second;
  }
  ValueId define(int id, const Type& t, Op* def, std::string name = "") {
    if (values_.count(id)) fail("%" + std::to_string(id) + " is defined twice");
    const ValueId v = f_->new_value(t, def, std::move(name));
    values_[id] = v;
    return v;
  }
  // `%3: T` (a region argument).
  ValueId typed_argument() {
    const int id = value_ref();
    expect(':');
    return define(id, type(), nullptr);
  }

  // ---- the signature
  void params() {
    expect('(');
    if (accept(')')) return;
    do {
      Param p;
      if (peek() == '%') {
        const int id = value_ref();
        expect(':');
        const Type t = type();
        p.name = identifier();
        p.kind = t.ptr                       ? ParamKind::Pointer
                 : is_floating_point(t.elem) ? ParamKind::Float
                                             : ParamKind::Int;
        p.value = define(id, t, nullptr, p.name);
        if (accept('{')) {
          expect_word("div16");
          expect('}');
          p.divisible_by_16 = true;
        }
      } else {
        p.name = identifier();
        expect(':');
        const std::string k = identifier();
        p.kind = k == "constexpr" ? ParamKind::Constexpr
                 : k == "int"     ? ParamKind::Int
                 : k == "float"   ? ParamKind::Float
                 : k == "ptr"     ? ParamKind::Pointer
                                  : (fail("unknown parameter kind '" + k + "'"), ParamKind::Int);
      }
      f_->params.push_back(p);
    } while (accept(','));
    expect(')');
  }
  void function_attributes() {
    expect('{');
    if (accept('}')) return;
    do {
      const std::string k = identifier();
      expect('=');
      if (k == "num_warps") {
        f_->attrs.num_warps = integer();
      } else if (k == "num_stages") {
        f_->attrs.num_stages = integer();
      } else if (k == "maxnreg") {
        f_->attrs.maxnreg = integer();
      } else if (k == "target") {
        f_->attrs.target = string_literal();
      } else {
        fail("unknown attribute '" + k + "'");
      }
    } while (accept(','));
    expect('}');
  }

  // ---- ops
  // Parses op lines into `r` until a line that closes the region: returns that line's rest
  // ("" for a plain "}", "else" for "} else {", "do" for "} do {").
  std::string ops_until_close(Region& r) {
    for (;;) {
      if (done()) fail("the region is not closed");
      line_ = next_line();
      if (at_comment() || peek() == '\0') continue;
      if (peek() == '}') {
        ++pos_;
        if (accept_word("else")) {
          expect('{');
          expect_end_of_line();
          return "else";
        }
        if (accept_word("do")) {
          expect('{');
          expect_end_of_line();
          return "do";
        }
        return "";
      }
      if (peek() == '^') {
        ++pos_;
        expect('(');
        if (!accept(')')) {
          do {
            r.args.push_back(typed_argument());
          } while (accept(','));
          expect(')');
        }
        expect(':');
        expect_end_of_line();
        continue;
      }
      r.ops.push_back(op());
    }
  }

  Op* op() {
    std::vector<int> results;
    if (peek() == '%') {
      do {
        results.push_back(value_ref());
      } while (accept(','));
      expect('=');
    }
    const std::string m = identifier();
    if (m == "for") return for_op(results);
    if (m == "if") return if_op(results);
    Op* o = f_->new_op(OpKind::Constant);
    kind_of(m, *o);
    if (o->kind == OpKind::Constant) {
      skip_space();
      const size_t b = pos_;
      while (pos_ < line_.size() && line_[pos_] != ' ' && line_[pos_] != ':') ++pos_;
      const std::string lit(line_.substr(b, pos_ - b));
      const auto types = result_types();
      if (types.size() != 1) fail("a constant has one result type");
      char* end = nullptr;
      errno = 0;
      if (types[0].is_float()) {
        o->fval = std::strtod(lit.c_str(), &end);
        if (lit == "-nan") o->fval = -std::nan("");
      } else {
        o->ival = std::strtoll(lit.c_str(), &end, 10);
      }
      const bool overflow = errno == ERANGE && (!types[0].is_float() || std::isinf(o->fval));
      if (lit.empty() || end != lit.c_str() + lit.size() || overflow)
        fail("'" + lit + "' is not a constant of type " + types[0].str());
      o->loc = location();
      finish(*o, results, types);
      return o;
    }
    while (peek() == '%') {
      o->operands.push_back(use());
      if (!accept(',')) break;
    }
    if (peek() == '{') op_attributes(*o);
    const auto types = result_types();
    const bool regions = traits(o->kind).regions > 0;  // for and if were parsed above
    if (regions) expect('{');
    o->loc = location();
    skip_space();
    if (pos_ != line_.size()) fail("unexpected text");
    // Results are defined before the op's regions (as the printer numbers them).
    finish(*o, results, types);
    if (regions) {
      o->regions.emplace_back();
      if (ops_until_close(o->regions.back()) == "do") {
        o->regions.emplace_back();
        if (!ops_until_close(o->regions.back()).empty()) fail("expected '}'");
      }
    }
    return o;
  }

  void finish(Op& o, const std::vector<int>& results, const std::vector<Type>& types) {
    if (results.size() != types.size()) {
      fail(std::to_string(results.size()) + " results but " + std::to_string(types.size()) +
           " result types");
    }
    for (size_t i = 0; i < results.size(); ++i)
      o.results.push_back(define(results[i], types[i], &o));
  }

  void kind_of(const std::string& m, Op& o) {
    const auto dot = m.find('.');
    const std::string head = m.substr(0, dot),
                      tail = dot == std::string::npos ? "" : m.substr(dot + 1);
    for (int k = 0; k < num_binary_kinds(); ++k) {
      if (m == binary_name(static_cast<BinaryKind>(k))) {
        o.kind = OpKind::Binary;
        o.sub = static_cast<uint8_t>(k);
        return;
      }
    }
    for (int k = 0; k < num_unary_kinds(); ++k) {
      if (m == unary_name(static_cast<UnaryKind>(k))) {
        o.kind = OpKind::Unary;
        o.sub = static_cast<uint8_t>(k);
        return;
      }
    }
    auto sub = [&](int n, auto name_of) {
      for (int k = 0; k < n; ++k) {
        if (tail == name_of(k)) {
          o.sub = static_cast<uint8_t>(k);
          return;
        }
      }
      fail("unknown kind '" + tail + "' of " + head);
    };
    if (head == "cmp") {
      o.kind = OpKind::Compare;
      return sub(num_cmp_kinds(), [](int k) { return cmp_name(static_cast<CmpKind>(k)); });
    }
    if (head == "reduce") {
      o.kind = OpKind::Reduce;
      return sub(num_reduce_kinds(), [](int k) { return reduce_name(static_cast<ReduceKind>(k)); });
    }
    if (head == "dot") {
      o.kind = OpKind::Dot;
      return sub(3, [](int k) { return precision_name(static_cast<DotPrecision>(k)); });
    }
    if (head == "atomic") {
      o.kind = OpKind::Atomic;
      return sub(7, [](int k) { return atomic_name(static_cast<AtomicKind>(k)); });
    }
    for (int k = 0; k < num_op_kinds(); ++k) {
      const auto kind = static_cast<OpKind>(k);
      if (kind == OpKind::Binary || kind == OpKind::Unary) continue;
      if (m == op_name(kind)) {
        o.kind = kind;
        return;
      }
    }
    fail("unknown op '" + m + "'");
  }

  void op_attributes(Op& o) {
    expect('{');
    do {
      const std::string k = identifier();
      expect('=');
      if (k == "axis" || k == "index") {
        o.ival = integer();
      } else if (k == "start") {
        o.ival = integer();
      } else if (k == "end") {
        o.ival2 = integer();
      } else if (k == "reverse" || k == "hint" || k == "impure") {
        o.sub = static_cast<uint8_t>(integer());
      } else if (k == "sem") {
        const std::string s = identifier();
        bool found = false;
        for (int i = 0; i < 4; ++i) {
          if (s == order_name(static_cast<MemOrder>(i))) {
            o.ival = i;
            found = true;
          }
        }
        if (!found) fail("unknown memory order '" + s + "'");
      } else if (k == "perm") {
        expect('[');
        int64_t packed = 0;
        int d = 0;
        do {
          packed |= integer() << (4 * d++);
        } while (accept(','));
        expect(']');
        o.ival = packed;
      } else if (k == "text") {
        o.text = string_literal();
      } else {
        fail("unknown attribute '" + k + "'");
      }
    } while (accept(','));
    expect('}');
  }

  Op* for_op(const std::vector<int>& results) {
    Op* o = f_->new_op(OpKind::For);
    o->regions.emplace_back();
    Region& body = o->regions[0];
    // Results first (their types come at the end of the line), then the region's arguments.
    const int iv = value_ref();
    expect(':');
    const Type iv_type = type();
    expect('=');
    o->operands.push_back(use());
    expect_word("to");
    o->operands.push_back(use());
    expect_word("step");
    o->operands.push_back(use());
    std::vector<std::pair<int, Type>> carried;
    if (accept_word("iter_args")) {
      expect('(');
      do {
        const int id = value_ref();
        expect(':');
        const Type t = type();
        expect('=');
        o->operands.push_back(use());
        carried.push_back({id, t});
      } while (accept(','));
      expect(')');
    }
    if (accept_word("attributes")) {
      LoopOptions lo;
      expect('{');
      do {
        const std::string k = identifier();
        expect('=');
        const int64_t val = integer();
        if (k == "num_stages") {
          lo.num_stages = static_cast<int>(val);
        } else if (k == "loop_unroll_factor") {
          lo.loop_unroll_factor = static_cast<int>(val);
        } else if (k == "flatten") {
          lo.flatten = val != 0;
        } else if (k == "warp_specialize") {
          lo.warp_specialize = val != 0;
        } else if (k == "disallow_acc_multi_buffer") {
          lo.disallow_acc_multi_buffer = val != 0;
        } else {
          fail("unknown loop attribute '" + k + "'");
        }
      } while (accept(','));
      expect('}');
      o->ival = lo.pack();
    }
    const auto types = result_types();
    expect('{');
    o->loc = location();
    finish(*o, results, types);
    body.args.push_back(define(iv, iv_type, nullptr));
    for (const auto& [id, t] : carried) body.args.push_back(define(id, t, nullptr));
    if (!ops_until_close(body).empty()) fail("expected '}' closing the loop");
    return o;
  }

  Op* if_op(const std::vector<int>& results) {
    Op* o = f_->new_op(OpKind::If);
    o->operands.push_back(use());
    const auto types = result_types();
    expect('{');
    o->loc = location();
    finish(*o, results, types);
    o->regions.resize(2);
    if (ops_until_close(o->regions[0]) != "else") fail("expected '} else {'");
    if (!ops_until_close(o->regions[1]).empty()) fail("expected '}' closing the branch");
    return o;
  }

  std::string_view text_;
  size_t next_ = 0;
  std::string_view line_;
  size_t pos_ = 0;
  int line_no_ = 0;
  std::unique_ptr<Function> f_;
  std::unordered_map<int, ValueId> values_;
};

// ---- equality
// -------------------------------------------------------------------------------------

class Compare {
 public:
  Compare(const Function& a, const Function& b) : a_(a), b_(b) {}

  bool run(std::string* why) {
    why_ = why;
    if (a_.name != b_.name) return fail("names differ");
    if (a_.params.size() != b_.params.size()) return fail("parameter counts differ");
    for (size_t i = 0; i < a_.params.size(); ++i) {
      const Param &p = a_.params[i], &q = b_.params[i];
      if (p.name != q.name || p.kind != q.kind || p.divisible_by_16 != q.divisible_by_16 ||
          (p.value == kNoValue) != (q.value == kNoValue))
        return fail("parameter " + p.name + " differs");
      if (p.value != kNoValue && !bind(p.value, q.value)) return fail("parameter types differ");
    }
    const auto &x = a_.attrs, &y = b_.attrs;
    if (x.num_warps != y.num_warps || x.num_stages != y.num_stages || x.maxnreg != y.maxnreg ||
        x.target != y.target)
      return fail("launch attributes differ");
    return region(a_.body, b_.body);
  }

 private:
  bool fail(const std::string& s) {
    if (why_) *why_ = s;
    return false;
  }
  bool bind(ValueId a, ValueId b) {
    if (a_.type(a) != b_.type(b)) return false;
    auto [it, inserted] = map_.emplace(a, b);
    return inserted || it->second == b;
  }
  bool same_use(ValueId a, ValueId b) {
    auto it = map_.find(a);
    return it != map_.end() && it->second == b;
  }
  static std::string loc_text(SourceLoc l) {
    std::ostringstream os;
    os << l;
    return os.str();
  }
  bool region(const Region& r, const Region& s) {
    if (r.args.size() != s.args.size()) return fail("region argument counts differ");
    for (size_t i = 0; i < r.args.size(); ++i) {
      if (!bind(r.args[i], s.args[i])) return fail("region arguments differ");
    }
    if (r.ops.size() != s.ops.size()) return fail("op counts differ");
    for (size_t i = 0; i < r.ops.size(); ++i) {
      const Op &o = *r.ops[i], &p = *s.ops[i];
      const std::string at = std::string(op_name(o.kind)) + " #" + std::to_string(i);
      if (o.kind != p.kind || o.sub != p.sub || o.ival != p.ival || o.ival2 != p.ival2 ||
          o.text != p.text || !(o.fval == p.fval || (std::isnan(o.fval) && std::isnan(p.fval))))
        return fail(at + ": kinds or fields differ");
      if (loc_text(o.loc) != loc_text(p.loc)) return fail(at + ": source lines differ");
      if (o.operands.size() != p.operands.size()) return fail(at + ": operand counts differ");
      for (size_t k = 0; k < o.operands.size(); ++k) {
        if (!same_use(o.operands[k], p.operands[k])) return fail(at + ": operands differ");
      }
      if (o.results.size() != p.results.size()) return fail(at + ": result counts differ");
      for (size_t k = 0; k < o.results.size(); ++k) {
        if (!bind(o.results[k], p.results[k])) return fail(at + ": result types differ");
      }
      if (o.regions.size() != p.regions.size()) return fail(at + ": region counts differ");
      for (size_t k = 0; k < o.regions.size(); ++k) {
        if (!region(o.regions[k], p.regions[k])) return false;
      }
    }
    return true;
  }

  const Function& a_;
  const Function& b_;
  std::unordered_map<ValueId, ValueId> map_;
  std::string* why_ = nullptr;
};

}  // namespace

std::string print(const Function& f, bool attributes) {
  return Printer(f, attributes).run();
}

std::unique_ptr<Function> parse(std::string_view text) {
  return Parser(text).run();
}

bool same_function(const Function& a, const Function& b, std::string* why) {
  return Compare(a, b).run(why);
}

}  // namespace tessera::ir
