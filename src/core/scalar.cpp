#include "tessera/scalar.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <sstream>

#include "tessera/error.h"

namespace tessera {

int64_t Scalar::to_int() const {
  if (kind_ != Kind::Double) return v_.i;
  TS_CHECK(std::trunc(v_.d) == v_.d && std::abs(v_.d) < 9.2e18, TypeError)
      << "expected an integer scalar but got " << v_.d;
  return static_cast<int64_t>(v_.d);
}

Scalar Scalar::operator-() const {
  switch (kind_) {
    case Kind::Bool:
      return Scalar(-int64_t(v_.i));
    case Kind::Int:
      return Scalar(-v_.i);
    case Kind::Double:
      return Scalar(-v_.d);
  }
  return *this;
}

bool Scalar::operator==(const Scalar& o) const {
  if (kind_ == Kind::Double || o.kind_ == Kind::Double) return to_double() == o.to_double();
  return v_.i == o.v_.i;
}

std::string Scalar::str() const {
  std::ostringstream os;
  switch (kind_) {
    case Kind::Bool:
      os << (v_.i ? "True" : "False");
      break;
    case Kind::Int:
      os << v_.i;
      break;
    case Kind::Double: {
      // Python's repr: shortest round-trip form, always with a decimal point or exponent.
      char buf[32];
      for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, v_.d);
        if (std::strtod(buf, nullptr) == v_.d) break;
      }
      std::string s = buf;
      if (std::isfinite(v_.d) && s.find_first_of(".e") == std::string::npos) s += ".0";
      if (std::isinf(v_.d)) s = v_.d > 0 ? "inf" : "-inf";
      if (std::isnan(v_.d)) s = "nan";
      os << s;
      break;
    }
  }
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  return os << s.str();
}

std::ostream& operator<<(std::ostream& os, Half v) {
  return os << static_cast<float>(v);
}
std::ostream& operator<<(std::ostream& os, BFloat16 v) {
  return os << static_cast<float>(v);
}
std::ostream& operator<<(std::ostream& os, Float8_e4m3fn v) {
  return os << static_cast<float>(v);
}
std::ostream& operator<<(std::ostream& os, Float8_e5m2 v) {
  return os << static_cast<float>(v);
}

}  // namespace tessera
