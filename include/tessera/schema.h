/** \file
 * Operator schemas in PyTorch's syntax:
 *
 *     mylib::mysin(Tensor x) -> Tensor
 *     aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
 *     aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)
 *     aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
 *
 * Types: Tensor, int, SymInt, float, bool, Scalar, ScalarType, Device, str; `T?` optional,
 * `T[]` / `T[N]` lists, `Tensor?[]`. Alias annotations `(a)` (a view of set a) and `(a!)`
 * (written). Arguments after `*` are keyword-only. Defaults: numbers, True/False, None, quoted
 * strings, lists `[0, 1]`, dtypes (`float32`).
 */
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/ivalue.h"

namespace tessera {

/** The base kind of a schema type. */
enum class TypeKind : uint8_t { Tensor, Int, SymInt, Float, Bool, Scalar, ScalarType, Device, Str };

struct SchemaType {
  TypeKind kind = TypeKind::Tensor;
  bool optional = false;          ///< `T?`
  bool list = false;              ///< `T[]`
  int list_size = -1;             ///< `T[N]`, -1 when unsized
  bool element_optional = false;  ///< `Tensor?[]`

  /** "Tensor", "int[]?", "Tensor?[]", "int[2]". */
  std::string str() const;
  bool operator==(const SchemaType& o) const;
  /** Whether the type holds tensors (Tensor, Tensor?, Tensor[], Tensor?[]). */
  bool is_tensor_like() const { return kind == TypeKind::Tensor; }
};

/** `(a)` or `(a!)` on a tensor argument or return. */
struct AliasInfo {
  std::string set;
  bool is_write = false;
};

struct Argument {
  std::string name;
  SchemaType type;
  std::optional<IValue> default_value;
  std::optional<AliasInfo> alias;
  bool kwarg_only = false;

  bool is_written() const { return alias && alias->is_write; }
};

class FunctionSchema {
 public:
  /** Parses a schema; `ValueError` naming the position on malformed input. A schema without a
   * namespace takes `default_ns`. */
  static FunctionSchema parse(std::string_view text, std::string_view default_ns = "");

  const std::string& ns() const { return ns_; }
  const std::string& name() const { return name_; }
  /** Empty for the default overload. */
  const std::string& overload() const { return overload_; }
  /** "ns::name.overload" (or "ns::name"). */
  std::string qualified_name() const;
  /** "ns::name". */
  std::string base_name() const { return ns_ + "::" + name_; }

  const std::vector<Argument>& arguments() const { return args_; }
  const std::vector<Argument>& returns() const { return returns_; }
  /** Index of the argument called `name`, or -1. */
  int argument_index(std::string_view name) const;
  /** True when some argument is written (`(a!)`). */
  bool is_mutable() const;

  /** The schema text, normalized. */
  std::string str() const;

  /** Checks that `other` has the same argument and return types (names may differ). */
  bool same_signature(const FunctionSchema& other) const;

 private:
  std::string ns_, name_, overload_;
  std::vector<Argument> args_, returns_;
};

std::ostream& operator<<(std::ostream& os, const FunctionSchema& s);

}  // namespace tessera
