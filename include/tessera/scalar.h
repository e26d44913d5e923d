/** \file
 * `Scalar`: a C++ number passed to an operator (`x + 2`, `full(..., 0.5)`): bool, int64 or double.
 */
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <type_traits>

#include "tessera/dtype.h"
#include "tessera/float_types.h"

namespace tessera {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Double };

  Scalar() : Scalar(int64_t(0)) {}
  Scalar(bool v) : kind_(Kind::Bool) { v_.i = v; }  // NOLINT: implicit, scalars convert freely
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int) {  // NOLINT
    v_.i = static_cast<int64_t>(v);
  }
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Double) {  // NOLINT
    v_.d = static_cast<double>(v);
  }
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}           // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}       // NOLINT
  Scalar(Float8_e4m3fn v) : Scalar(static_cast<float>(v)) {}  // NOLINT
  Scalar(Float8_e5m2 v) : Scalar(static_cast<float>(v)) {}    // NOLINT

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_floating_point() const { return kind_ == Kind::Double; }

  /** The dtype a tensor made from this scalar gets: bool, int64 or float64. */
  DType dtype() const {
    return kind_ == Kind::Bool ? DType::Bool : kind_ == Kind::Int ? DType::Int64 : DType::Float64;
  }

  double to_double() const { return kind_ == Kind::Double ? v_.d : static_cast<double>(v_.i); }
  int64_t to_int() const;  ///< `TypeError` for a non-integral double
  bool to_bool() const { return kind_ == Kind::Double ? v_.d != 0 : v_.i != 0; }
  /** The raw value converted with C++ rules (truncation for floating to integer). */
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>)
      return to_bool();
    else if (kind_ == Kind::Double)
      return static_cast<T>(v_.d);
    else
      return static_cast<T>(v_.i);
  }

  Scalar operator-() const;
  bool operator==(const Scalar& o) const;
  std::string str() const;

 private:
  Kind kind_;
  union {
    int64_t i;
    double d;
  } v_;
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace tessera
