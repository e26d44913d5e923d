#include "tessera/schema.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ostream>
#include <sstream>

namespace tessera {

std::string SchemaType::str() const {
  static constexpr const char* kNames[] = {"Tensor", "int",        "SymInt", "float", "bool",
                                           "Scalar", "ScalarType", "Device", "str"};
  std::string s = kNames[static_cast<int>(kind)];
  if (element_optional) s += "?";
  if (list) s += list_size >= 0 ? "[" + std::to_string(list_size) + "]" : "[]";
  if (optional) s += "?";
  return s;
}

bool SchemaType::operator==(const SchemaType& o) const {
  return kind == o.kind && optional == o.optional && list == o.list &&
         element_optional == o.element_optional;
}

namespace {

// `int[N]`: N at most this (PyTorch's schemas use 1 to 3).
constexpr int64_t kMaxListSize = 4096;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  [[noreturn]] void fail(const std::string& what) {
    TS_ERROR(ValueError) << "bad schema '" << s_ << "': " << what << " at position " << pos_;
  }

  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool peek(std::string_view tok) {
    skip_ws();
    return s_.substr(pos_, tok.size()) == tok;
  }
  bool accept(std::string_view tok) {
    if (!peek(tok)) return false;
    pos_ += tok.size();
    return true;
  }
  void expect(std::string_view tok) {
    if (!accept(tok)) fail("expected '" + std::string(tok) + "'");
  }
  bool at_end() {
    skip_ws();
    return pos_ >= s_.size();
  }
  std::string ident() {
    skip_ws();
    const size_t b = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
      ++pos_;
    }
    if (b == pos_) fail("expected a name");
    return std::string(s_.substr(b, pos_ - b));
  }

  SchemaType type(std::optional<AliasInfo>& alias) {
    const std::string base = ident();
    SchemaType t;
    if (base == "Tensor")
      t.kind = TypeKind::Tensor;
    else if (base == "int")
      t.kind = TypeKind::Int;
    else if (base == "SymInt")
      t.kind = TypeKind::SymInt;
    else if (base == "float")
      t.kind = TypeKind::Float;
    else if (base == "bool")
      t.kind = TypeKind::Bool;
    else if (base == "Scalar")
      t.kind = TypeKind::Scalar;
    else if (base == "ScalarType")
      t.kind = TypeKind::ScalarType;
    else if (base == "Device")
      t.kind = TypeKind::Device;
    else if (base == "str")
      t.kind = TypeKind::Str;
    else
      fail("unknown type '" + base + "'");
    if (accept("(")) {
      AliasInfo a;
      a.set = ident();
      a.is_write = accept("!");
      expect(")");
      if (t.kind != TypeKind::Tensor) fail("alias annotation on a non-tensor type");
      alias = a;
    }
    for (;;) {
      if (accept("?")) {
        if (t.list)
          t.optional = true;
        else
          t.element_optional = true;
      } else if (accept("[")) {
        if (t.list) fail("nested lists are not supported");
        t.list = true;
        skip_ws();
        if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
          int64_t n = 0;
          while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
            n = std::min<int64_t>(n * 10 + (s_[pos_++] - '0'), kMaxListSize + 1);
          }
          if (n > kMaxListSize)
            fail("a list size above " + std::to_string(kMaxListSize) +
                 " (T[N] is for short lists)");
          t.list_size = static_cast<int>(n);
        }
        expect("]");
      } else {
        break;
      }
    }
    // `T?` without a list is parsed as element_optional above; normalize.
    if (!t.list && t.element_optional) {
      t.element_optional = false;
      t.optional = true;
    }
    if (t.element_optional && t.kind != TypeKind::Tensor)
      fail("only Tensor?[] lists are supported");
    return t;
  }

  // A default literal, as text up to the next ',' or ')' at depth 0.
  std::string literal() {
    skip_ws();
    const size_t b = pos_;
    int depth = 0;
    char quote = 0;
    for (; pos_ < s_.size(); ++pos_) {
      const char c = s_[pos_];
      if (quote) {
        if (c == quote) quote = 0;
        continue;
      }
      if (c == '\'' || c == '"')
        quote = c;
      else if (c == '[' || c == '(')
        ++depth;
      else if ((c == ']' || c == ')') && depth > 0)
        --depth;
      else if ((c == ',' || c == ')') && depth == 0)
        break;
    }
    std::string lit(s_.substr(b, pos_ - b));
    while (!lit.empty() && std::isspace(static_cast<unsigned char>(lit.back()))) lit.pop_back();
    if (lit.empty()) fail("expected a default value");
    return lit;
  }

  // A string literal: one run of text between two equal quotes (no escapes; the other quote may
  // appear inside). Without `required`, an unquoted literal is taken as it is.
  std::string unquote(const std::string& lit, bool required) {
    const char q = lit.front();
    if (q != '\'' && q != '"') {
      if (required) fail("strings are quoted");
      return lit;
    }
    if (lit.size() < 2 || lit.back() != q || lit.find(q, 1) != lit.size() - 1)
      fail("bad string literal " + lit + ": one quoted run of text, without escapes");
    return lit.substr(1, lit.size() - 2);
  }

  IValue parse_number(const std::string& lit, bool want_float) {
    char* end = nullptr;
    if (!want_float && lit.find_first_of(".eE") == std::string::npos &&
        lit.find("inf") == std::string::npos) {
      const long long v = std::strtoll(lit.c_str(), &end, 10);
      if (end && *end == '\0') return IValue(static_cast<int64_t>(v));
    }
    const double d = std::strtod(lit.c_str(), &end);
    if (!end || *end != '\0') fail("bad number '" + lit + "'");
    return IValue(d);
  }

  IValue default_value(const std::string& lit, const SchemaType& t) {
    if (lit == "None") {
      if (!t.optional) fail("default None for a non-optional argument");
      return IValue();
    }
    if (t.list) {
      std::vector<std::string> items;
      if (lit.front() == '[') {
        if (lit.back() != ']') fail("bad list default '" + lit + "'");
        std::string inner = lit.substr(1, lit.size() - 2);
        std::stringstream ss(inner);
        std::string item;
        while (std::getline(ss, item, ',')) {
          while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())))
            item.erase(0, 1);
          while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back())))
            item.pop_back();
          if (!item.empty()) items.push_back(item);
        }
      } else {
        // `int[2] stride=1` repeats the value.
        const int n = t.list_size > 0 ? t.list_size : 1;
        for (int i = 0; i < n; ++i) items.push_back(lit);
      }
      switch (t.kind) {
        case TypeKind::Int: {
          std::vector<int64_t> v;
          for (auto& it : items) v.push_back(parse_number(it, false).to_int());
          return IValue(std::move(v));
        }
        case TypeKind::SymInt: {
          std::vector<SymInt> v;
          for (auto& it : items) v.emplace_back(parse_number(it, false).to_int());
          return IValue(std::move(v));
        }
        case TypeKind::Float: {
          std::vector<double> v;
          for (auto& it : items) v.push_back(parse_number(it, true).to_double());
          return IValue(std::move(v));
        }
        case TypeKind::Bool: {
          std::vector<bool> v;
          for (auto& it : items) v.push_back(it == "True");
          return IValue(std::move(v));
        }
        default:
          fail("default values for lists of " + t.str() + " are not supported");
      }
    }
    switch (t.kind) {
      case TypeKind::Int:
      case TypeKind::SymInt:
        return parse_number(lit, false);
      case TypeKind::Float:
        return parse_number(lit, true);
      case TypeKind::Scalar:
        if (lit == "True" || lit == "False") return IValue(lit == "True");
        return parse_number(lit, false);
      case TypeKind::Bool:
        if (lit != "True" && lit != "False") fail("bad bool default '" + lit + "'");
        return IValue(lit == "True");
      case TypeKind::Str:
        return IValue(unquote(lit, true));
      case TypeKind::ScalarType: {
        auto d = parse_dtype(lit);
        if (!d) fail("unknown dtype '" + lit + "'");
        return IValue(*d);
      }
      case TypeKind::Device: {
        return IValue(Device(std::string_view(unquote(lit, false))));
      }
      case TypeKind::Tensor:
        fail("tensors cannot have a default other than None");
    }
    fail("bad default");
  }

  Argument argument(bool kwarg_only) {
    Argument a;
    a.type = type(a.alias);
    a.name = ident();
    a.kwarg_only = kwarg_only;
    if (accept("=")) a.default_value = default_value(literal(), a.type);
    return a;
  }

  Argument ret() {
    Argument a;
    a.type = type(a.alias);
    skip_ws();
    if (pos_ < s_.size() &&
        (std::isalpha(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
      a.name = ident();
    }
    return a;
  }

  size_t pos_ = 0;
  std::string_view s_;
};

}  // namespace

FunctionSchema FunctionSchema::parse(std::string_view text, std::string_view default_ns) {
  Parser p(text);
  FunctionSchema fs;
  std::string first = p.ident();
  if (p.accept("::")) {
    fs.ns_ = first;
    fs.name_ = p.ident();
  } else {
    fs.ns_ = std::string(default_ns);
    fs.name_ = first;
  }
  if (fs.ns_.empty()) p.fail("missing namespace (write 'ns::name')");
  if (p.accept(".")) fs.overload_ = p.ident();
  if (fs.overload_ == "default") fs.overload_.clear();
  p.expect("(");
  bool kwarg_only = false;
  if (!p.accept(")")) {
    for (;;) {
      if (p.accept("*")) {
        if (kwarg_only) p.fail("a second '*'");
        kwarg_only = true;
      } else {
        fs.args_.push_back(p.argument(kwarg_only));
      }
      if (p.accept(")")) break;
      p.expect(",");
    }
  }
  p.expect("->");
  if (p.accept("(")) {
    if (!p.accept(")")) {
      for (;;) {
        fs.returns_.push_back(p.ret());
        if (p.accept(")")) break;
        p.expect(",");
      }
    }
  } else {
    fs.returns_.push_back(p.ret());
  }
  if (!p.at_end()) p.fail("trailing text");

  bool seen_default = false;
  for (size_t i = 0; i < fs.args_.size(); ++i) {
    const auto& a = fs.args_[i];
    for (size_t j = 0; j < i; ++j) {
      TS_CHECK(fs.args_[j].name != a.name, ValueError)
          << "bad schema '" << text << "': argument '" << a.name << "' appears twice";
    }
    if (!a.kwarg_only) {
      TS_CHECK(!seen_default || a.default_value.has_value(), ValueError)
          << "bad schema '" << text << "': positional argument '" << a.name
          << "' without a default follows one with a default";
      seen_default = seen_default || a.default_value.has_value();
    }
  }
  return fs;
}

std::string FunctionSchema::qualified_name() const {
  return overload_.empty() ? base_name() : base_name() + "." + overload_;
}

int FunctionSchema::argument_index(std::string_view name) const {
  for (size_t i = 0; i < args_.size(); ++i) {
    if (args_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool FunctionSchema::is_mutable() const {
  for (const auto& a : args_) {
    if (a.is_written()) return true;
  }
  return false;
}

namespace {
std::string type_with_alias(const Argument& a) {
  std::string s = a.type.str();
  if (a.alias) {
    // Insert the annotation right after the base name: Tensor(a!)?, Tensor(a)[].
    const size_t base_len =
        s.find_first_of("?[") == std::string::npos ? s.size() : s.find_first_of("?[");
    s.insert(base_len, "(" + a.alias->set + (a.alias->is_write ? "!" : "") + ")");
  }
  return s;
}

std::string default_str(const IValue& v) {
  if (v.is_string()) {  // quoted so that parse reads it back (the parser has no escapes)
    const std::string q = v.to_string().find('\'') == std::string::npos ? "'" : "\"";
    return q + v.to_string() + q;
  }
  if (v.is_dtype()) return dtype_name(v.to_dtype());
  if (v.is_device()) return "'" + v.to_device().str() + "'";
  return v.repr();
}
}  // namespace

std::string FunctionSchema::str() const {
  std::ostringstream os;
  os << qualified_name() << "(";
  bool kw = false;
  for (size_t i = 0; i < args_.size(); ++i) {
    const auto& a = args_[i];
    if (i) os << ", ";
    if (a.kwarg_only && !kw) {
      os << "*, ";
      kw = true;
    }
    os << type_with_alias(a) << " " << a.name;
    if (a.default_value) os << "=" << default_str(*a.default_value);
  }
  os << ") -> ";
  const bool paren = returns_.size() != 1;
  if (paren) os << "(";
  for (size_t i = 0; i < returns_.size(); ++i) {
    if (i) os << ", ";
    os << type_with_alias(returns_[i]);
    if (!returns_[i].name.empty()) os << " " << returns_[i].name;
  }
  if (paren) os << ")";
  return os.str();
}

bool FunctionSchema::same_signature(const FunctionSchema& o) const {
  if (args_.size() != o.args_.size() || returns_.size() != o.returns_.size()) return false;
  for (size_t i = 0; i < args_.size(); ++i) {
    if (!(args_[i].type == o.args_[i].type)) return false;
  }
  for (size_t i = 0; i < returns_.size(); ++i) {
    if (!(returns_[i].type == o.returns_[i].type)) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& os, const FunctionSchema& s) {
  return os << s.str();
}

}  // namespace tessera
