#include "tessera/ivalue.h"

#include <ostream>
#include <sstream>

namespace tessera {

struct IValue::Heap : RefCounted {};

namespace {
template <class T>
struct Box : IValue::Heap {
  explicit Box(T x) : v(std::move(x)) {}
  T v;
};

template <class T>
IValue::Heap* boxed(T v) {
  auto* b = new Box<T>(std::move(v));
  b->incref();
  return b;
}

template <class T>
T& unbox(IValue::Heap* h) {
  return static_cast<Box<T>*>(h)->v;
}

bool is_heap(IValue::Tag t) {
  switch (t) {
    case IValue::Tag::SymInt:
    case IValue::Tag::String:
    case IValue::Tag::Device:
    case IValue::Tag::IntList:
    case IValue::Tag::SymIntList:
    case IValue::Tag::DoubleList:
    case IValue::Tag::BoolList:
    case IValue::Tag::TensorList:
    case IValue::Tag::OptionalTensorList:
    case IValue::Tag::Tuple:
      return true;
    default:
      return false;
  }
}
}  // namespace

IValue::IValue(Tensor t) : tag_(Tag::Tensor) {
  if (!t.defined()) {
    tag_ = Tag::None;
    return;
  }
  new (u_.t) Tensor(std::move(t));
}

IValue::IValue(const SymInt& v) {
  if (auto i = v.maybe_as_int()) {
    tag_ = Tag::Int;
    u_.i = *i;
  } else {
    tag_ = Tag::SymInt;
    u_.h = boxed(v);
  }
}

IValue::IValue(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      tag_ = Tag::Bool;
      u_.b = s.to_bool();
      break;
    case Scalar::Kind::Int:
      tag_ = Tag::Int;
      u_.i = s.to_int();
      break;
    case Scalar::Kind::Double:
      tag_ = Tag::Double;
      u_.d = s.to_double();
      break;
  }
}

IValue::IValue(std::string s) : tag_(Tag::String) {
  u_.h = boxed(std::move(s));
}
IValue::IValue(Device d) : tag_(Tag::Device) {
  u_.h = boxed(d);
}
IValue::IValue(std::vector<int64_t> v) : tag_(Tag::IntList) {
  u_.h = boxed(std::move(v));
}
IValue::IValue(std::vector<SymInt> v) : tag_(Tag::SymIntList) {
  u_.h = boxed(std::move(v));
}
IValue::IValue(std::vector<double> v) : tag_(Tag::DoubleList) {
  u_.h = boxed(std::move(v));
}
IValue::IValue(std::vector<bool> v) : tag_(Tag::BoolList) {
  u_.h = boxed(std::move(v));
}
IValue::IValue(std::vector<Tensor> v) : tag_(Tag::TensorList) {
  u_.h = boxed(std::move(v));
}
IValue::IValue(std::vector<std::optional<Tensor>> v) : tag_(Tag::OptionalTensorList) {
  u_.h = boxed(std::move(v));
}

IValue IValue::tuple(std::vector<IValue> items) {
  IValue v;
  v.tag_ = Tag::Tuple;
  v.u_.h = boxed(std::move(items));
  return v;
}

void IValue::destroy() noexcept {
  if (tag_ == Tag::Tensor) {
    reinterpret_cast<Tensor*>(u_.t)->~Tensor();
  } else if (is_heap(tag_)) {
    u_.h->decref();
  }
  tag_ = Tag::None;
}

void IValue::copy_from(const IValue& o) {
  tag_ = o.tag_;
  if (o.tag_ == Tag::Tensor) {
    new (u_.t) Tensor(*reinterpret_cast<const Tensor*>(o.u_.t));
  } else if (is_heap(o.tag_)) {
    u_.h = o.u_.h;
    u_.h->incref();
  } else {
    u_ = o.u_;
  }
}

IValue::IValue(const IValue& o) {
  copy_from(o);
}
IValue::IValue(IValue&& o) noexcept : tag_(o.tag_) {
  if (o.tag_ == Tag::Tensor) {
    new (u_.t) Tensor(std::move(*reinterpret_cast<Tensor*>(o.u_.t)));
    reinterpret_cast<Tensor*>(o.u_.t)->~Tensor();
  } else {
    u_ = o.u_;
  }
  o.tag_ = Tag::None;
}
IValue& IValue::operator=(const IValue& o) {
  if (this != &o) {
    IValue tmp(o);
    *this = std::move(tmp);
  }
  return *this;
}
IValue& IValue::operator=(IValue&& o) noexcept {
  if (this != &o) {
    destroy();
    new (this) IValue(std::move(o));
  }
  return *this;
}
IValue::~IValue() {
  destroy();
}

const char* IValue::type_name() const {
  switch (tag_) {
    case Tag::None:
      return "None";
    case Tag::Tensor:
      return "Tensor";
    case Tag::Int:
      return "int";
    case Tag::Double:
      return "float";
    case Tag::Bool:
      return "bool";
    case Tag::SymInt:
      return "SymInt";
    case Tag::String:
      return "str";
    case Tag::DType:
      return "ScalarType";
    case Tag::Device:
      return "Device";
    case Tag::IntList:
      return "int[]";
    case Tag::SymIntList:
      return "SymInt[]";
    case Tag::DoubleList:
      return "float[]";
    case Tag::BoolList:
      return "bool[]";
    case Tag::TensorList:
      return "Tensor[]";
    case Tag::OptionalTensorList:
      return "Tensor?[]";
    case Tag::Tuple:
      return "tuple";
  }
  return "?";
}

void IValue::bad_tag(const char* want) const {
  TS_ERROR(TypeError) << "expected a value of type " << want << " but got " << type_name();
}

const Tensor& IValue::to_tensor() const {
  if (tag_ != Tag::Tensor) bad_tag("Tensor");
  return *reinterpret_cast<const Tensor*>(u_.t);
}
Tensor& IValue::to_tensor() {
  if (tag_ != Tag::Tensor) bad_tag("Tensor");
  return *reinterpret_cast<Tensor*>(u_.t);
}
std::optional<Tensor> IValue::to_optional_tensor() const {
  if (tag_ == Tag::None) return std::nullopt;
  return to_tensor();
}
int64_t IValue::to_int() const {
  if (tag_ == Tag::Int) return u_.i;
  if (tag_ == Tag::SymInt) return unbox<SymInt>(u_.h).guard_int(UserLocGuard::current());
  if (tag_ == Tag::Bool) return u_.b;
  bad_tag("int");
}
double IValue::to_double() const {
  if (tag_ == Tag::Double) return u_.d;
  if (tag_ == Tag::Int) return static_cast<double>(u_.i);
  bad_tag("float");
}
bool IValue::to_bool() const {
  if (tag_ == Tag::Bool) return u_.b;
  bad_tag("bool");
}
SymInt IValue::to_symint() const {
  if (tag_ == Tag::Int) return SymInt(u_.i);
  if (tag_ == Tag::SymInt) return unbox<SymInt>(u_.h);
  bad_tag("SymInt");
}
Scalar IValue::to_scalar() const {
  switch (tag_) {
    case Tag::Int:
      return Scalar(u_.i);
    case Tag::Double:
      return Scalar(u_.d);
    case Tag::Bool:
      return Scalar(u_.b);
    default:
      bad_tag("Scalar");
  }
}
const std::string& IValue::to_string() const {
  if (tag_ != Tag::String) bad_tag("str");
  return unbox<std::string>(u_.h);
}
DType IValue::to_dtype() const {
  if (tag_ != Tag::DType) bad_tag("ScalarType");
  return static_cast<DType>(u_.i);
}
Device IValue::to_device() const {
  if (tag_ == Tag::String) return Device(std::string_view(to_string()));
  if (tag_ != Tag::Device) bad_tag("Device");
  return unbox<Device>(u_.h);
}
const std::vector<int64_t>& IValue::to_int_list() const {
  if (tag_ != Tag::IntList) bad_tag("int[]");
  return unbox<std::vector<int64_t>>(u_.h);
}
const std::vector<SymInt>& IValue::to_symint_list() const {
  if (tag_ != Tag::SymIntList) bad_tag("SymInt[]");
  return unbox<std::vector<SymInt>>(u_.h);
}
const std::vector<double>& IValue::to_double_list() const {
  if (tag_ != Tag::DoubleList) bad_tag("float[]");
  return unbox<std::vector<double>>(u_.h);
}
const std::vector<bool>& IValue::to_bool_list() const {
  if (tag_ != Tag::BoolList) bad_tag("bool[]");
  return unbox<std::vector<bool>>(u_.h);
}
const std::vector<Tensor>& IValue::to_tensor_list() const {
  if (tag_ != Tag::TensorList) bad_tag("Tensor[]");
  return unbox<std::vector<Tensor>>(u_.h);
}
std::vector<Tensor>& IValue::to_tensor_list() {
  if (tag_ != Tag::TensorList) bad_tag("Tensor[]");
  return unbox<std::vector<Tensor>>(u_.h);
}
const std::vector<std::optional<Tensor>>& IValue::to_optional_tensor_list() const {
  if (tag_ != Tag::OptionalTensorList) bad_tag("Tensor?[]");
  return unbox<std::vector<std::optional<Tensor>>>(u_.h);
}
const std::vector<IValue>& IValue::to_tuple() const {
  if (tag_ != Tag::Tuple) bad_tag("tuple");
  return unbox<std::vector<IValue>>(u_.h);
}

namespace {
std::string tensor_repr(const Tensor& t) {
  std::ostringstream os;
  os << "Tensor" << t.sizes() << " " << dtype_name(t.dtype());
  if (!t.device().is_cpu()) os << " " << t.device();
  return os.str();
}
template <class V, class F>
std::string list_repr(const V& v, F f) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + f(v[i]);
  return s + "]";
}
}  // namespace

std::string IValue::repr() const {
  switch (tag_) {
    case Tag::None:
      return "None";
    case Tag::Tensor:
      return tensor_repr(to_tensor());
    case Tag::Int:
      return std::to_string(u_.i);
    case Tag::Double:
      return Scalar(u_.d).str();
    case Tag::Bool:
      return u_.b ? "True" : "False";
    case Tag::SymInt:
      return to_symint().str();
    case Tag::String:
      return "'" + to_string() + "'";
    case Tag::DType:
      return std::string("tessera.") + dtype_name(to_dtype());
    case Tag::Device:
      return "device('" + to_device().str() + "')";
    case Tag::IntList:
      return list_repr(to_int_list(), [](int64_t v) { return std::to_string(v); });
    case Tag::SymIntList:
      return list_repr(to_symint_list(), [](const SymInt& v) { return v.str(); });
    case Tag::DoubleList:
      return list_repr(to_double_list(), [](double v) { return Scalar(v).str(); });
    case Tag::BoolList:
      return list_repr(to_bool_list(), [](bool v) { return std::string(v ? "True" : "False"); });
    case Tag::TensorList:
      return list_repr(to_tensor_list(), tensor_repr);
    case Tag::OptionalTensorList:
      return list_repr(to_optional_tensor_list(), [](const std::optional<Tensor>& t) {
        return t ? tensor_repr(*t) : std::string("None");
      });
    case Tag::Tuple: {
      std::string s = "(";
      const auto& items = to_tuple();
      for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i].repr();
      return s + (items.size() == 1 ? ",)" : ")");
    }
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, const IValue& v) {
  if (v.is_tensor()) return os << v.to_tensor();
  return os << v.repr();
}

}  // namespace tessera
