/** \file
 * `IValue`: one boxed operator argument or result (a tensor, number, list, string, dtype, device,
 * none or tuple), and `Stack`, the vector of them that boxed kernels, modes and wrapper tensor
 * handlers see. Only the slow dispatch path (modes, wrappers, calls by name) boxes.
 */
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

class IValue {
 public:
  enum class Tag : uint8_t {
    None,
    Tensor,
    Int,
    Double,
    Bool,
    SymInt,
    String,
    DType,
    Device,
    IntList,
    SymIntList,
    DoubleList,
    BoolList,
    TensorList,
    OptionalTensorList,
    Tuple,
  };

  IValue() : tag_(Tag::None) {}
  IValue(std::nullopt_t) : tag_(Tag::None) {}             // NOLINT
  IValue(Tensor t);                                       // NOLINT
  IValue(int64_t v) : tag_(Tag::Int) { u_.i = v; }        // NOLINT
  IValue(int v) : IValue(static_cast<int64_t>(v)) {}      // NOLINT
  IValue(double v) : tag_(Tag::Double) { u_.d = v; }      // NOLINT
  IValue(bool v) : tag_(Tag::Bool) { u_.b = v; }          // NOLINT
  IValue(const SymInt& v);                                // NOLINT: plain values box as Int
  IValue(const Scalar& s);                                // NOLINT: Int, Double or Bool
  IValue(std::string s);                                  // NOLINT
  IValue(std::string_view s) : IValue(std::string(s)) {}  // NOLINT
  IValue(const char* s) : IValue(std::string(s)) {}       // NOLINT
  IValue(DType t) : tag_(Tag::DType) { u_.i = static_cast<int64_t>(t); }  // NOLINT
  IValue(Device d);                                                       // NOLINT
  IValue(std::vector<int64_t> v);                                         // NOLINT
  IValue(std::vector<SymInt> v);                                          // NOLINT
  IValue(std::vector<double> v);                                          // NOLINT
  IValue(std::vector<bool> v);                                            // NOLINT
  IValue(std::vector<Tensor> v);                                          // NOLINT
  IValue(std::vector<std::optional<Tensor>> v);                           // NOLINT
  /** A tuple of values (multiple returns). */
  static IValue tuple(std::vector<IValue> items);
  template <class T>
  IValue(const std::optional<T>& v) : IValue() {  // NOLINT
    if (v) *this = IValue(*v);
  }

  IValue(const IValue& o);
  IValue(IValue&& o) noexcept;
  IValue& operator=(const IValue& o);
  IValue& operator=(IValue&& o) noexcept;
  ~IValue();

  Tag tag() const { return tag_; }
  /** "Tensor", "int", "float", "bool", "SymInt", "str", ... as in schemas. */
  const char* type_name() const;

  bool is_none() const { return tag_ == Tag::None; }
  bool is_tensor() const { return tag_ == Tag::Tensor; }
  bool is_int() const { return tag_ == Tag::Int; }
  bool is_double() const { return tag_ == Tag::Double; }
  bool is_bool() const { return tag_ == Tag::Bool; }
  bool is_symint() const { return tag_ == Tag::SymInt; }
  /** Int, SymInt: usable as an integer. */
  bool is_intlike() const { return tag_ == Tag::Int || tag_ == Tag::SymInt; }
  /** Int, Double, Bool: usable as a `Scalar`. */
  bool is_scalar() const { return tag_ == Tag::Int || tag_ == Tag::Double || tag_ == Tag::Bool; }
  bool is_string() const { return tag_ == Tag::String; }
  bool is_dtype() const { return tag_ == Tag::DType; }
  bool is_device() const { return tag_ == Tag::Device; }
  bool is_int_list() const { return tag_ == Tag::IntList; }
  bool is_symint_list() const { return tag_ == Tag::SymIntList; }
  bool is_double_list() const { return tag_ == Tag::DoubleList; }
  bool is_bool_list() const { return tag_ == Tag::BoolList; }
  bool is_tensor_list() const { return tag_ == Tag::TensorList; }
  bool is_optional_tensor_list() const { return tag_ == Tag::OptionalTensorList; }
  bool is_tuple() const { return tag_ == Tag::Tuple; }

  // Accessors throw `TypeError` on the wrong tag.
  const Tensor& to_tensor() const;
  Tensor& to_tensor();
  std::optional<Tensor> to_optional_tensor() const;
  int64_t to_int() const;
  double to_double() const;
  bool to_bool() const;
  SymInt to_symint() const;
  Scalar to_scalar() const;
  const std::string& to_string() const;
  DType to_dtype() const;
  Device to_device() const;
  const std::vector<int64_t>& to_int_list() const;
  const std::vector<SymInt>& to_symint_list() const;
  const std::vector<double>& to_double_list() const;
  const std::vector<bool>& to_bool_list() const;
  const std::vector<Tensor>& to_tensor_list() const;
  std::vector<Tensor>& to_tensor_list();
  const std::vector<std::optional<Tensor>>& to_optional_tensor_list() const;
  const std::vector<IValue>& to_tuple() const;

  /** Implicit use as the result of a call by name returning one tensor. */
  operator Tensor() const { return to_tensor(); }  // NOLINT

  /** Python-like repr, tensors as `Tensor[2, 3] float32`. */
  std::string repr() const;

  /** Reference-counted payload of strings, lists and tuples (implementation detail). */
  struct Heap;

 private:
  void destroy() noexcept;
  void copy_from(const IValue& o);
  Heap* heap() const { return u_.h; }
  [[noreturn]] void bad_tag(const char* want) const;

  Tag tag_;
  union U {
    int64_t i;
    double d;
    bool b;
    Heap* h;
    alignas(Tensor) unsigned char t[sizeof(Tensor)];
  } u_;
};

std::ostream& operator<<(std::ostream& os, const IValue& v);

using Stack = std::vector<IValue>;

}  // namespace tessera
