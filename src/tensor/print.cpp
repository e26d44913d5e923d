// Tensor printing in PyTorch's format (torch/_tensor_str.py): precision 4, line width 80,
// summarization above 1000 elements with 3 edge items, fixed/integer/scientific modes chosen
// from the nonzero finite values.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype_visit.h"
#include "tessera/tensor.h"

namespace tessera {
namespace {

constexpr int kPrecision = 4;
constexpr int kLineWidth = 80;
constexpr int kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

// One element, as Python would see it after `.tolist()`.
struct Value {
  enum Kind { Float, Int, UInt, Bool } kind;
  double f = 0;
  int64_t i = 0;
  uint64_t u = 0;
};

Value read_value(const Tensor& t, const char* base, int64_t off) {
  return visit_dtype<kAllDTypes>(t.dtype(), "print", [&]<class T>() {
    const T v = reinterpret_cast<const T*>(base)[off];
    Value r{Value::Float};
    if constexpr (std::is_same_v<T, bool>) {
      r.kind = Value::Bool;
      r.i = v;
    } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
      r.kind = Value::UInt;
      r.u = v;
    } else if constexpr (std::is_integral_v<T>) {
      r.kind = Value::Int;
      r.i = v;
    } else {
      r.f = static_cast<double>(static_cast<opmath_t<T>>(v));
    }
    return r;
  });
}

std::string fmt(const char* spec, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, kPrecision, v);
  return buf;
}

std::string nonfinite(double v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

class Formatter {
 public:
  Formatter(bool floating, const std::vector<Value>& values) : floating_(floating) {
    if (!floating_) {
      for (const auto& v : values) max_width_ = std::max<size_t>(max_width_, plain(v).size());
      return;
    }
    std::vector<double> nz;
    for (const auto& v : values) {
      if (std::isfinite(v.f) && v.f != 0) nz.push_back(v.f);
    }
    if (nz.empty()) return;
    double mn = std::fabs(nz[0]), mx = mn;
    for (double v : nz) {
      mn = std::min(mn, std::fabs(v));
      mx = std::max(mx, std::fabs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (int_mode_) {
      if (mx / mn > 1000.0 || mx > 1.0e8) {
        sci_mode_ = true;
        for (double v : nz) max_width_ = std::max(max_width_, fmt("%.*e", v).size());
      } else {
        for (double v : nz) max_width_ = std::max(max_width_, fmt("%.*f", v).size() - kPrecision);
      }
    } else if (mx / mn > 1000.0 || mx > 1.0e8 || mn < 1.0e-4) {
      sci_mode_ = true;
      for (double v : nz) max_width_ = std::max(max_width_, fmt("%.*e", v).size());
    } else {
      for (double v : nz) max_width_ = std::max(max_width_, fmt("%.*f", v).size());
    }
  }

  size_t width() const { return max_width_; }

  std::string format(const Value& v) const {
    std::string s;
    if (!floating_) {
      s = plain(v);
    } else if (!std::isfinite(v.f)) {
      s = nonfinite(v.f);
    } else if (sci_mode_) {
      s = fmt("%.*e", v.f);
    } else if (int_mode_) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f", v.f);
      s = std::string(buf) + ".";
    } else {
      s = fmt("%.*f", v.f);
    }
    if (s.size() < max_width_) s.insert(0, max_width_ - s.size(), ' ');
    return s;
  }

 private:
  static std::string plain(const Value& v) {
    switch (v.kind) {
      case Value::Bool:
        return v.i ? "True" : "False";
      case Value::Int:
        return std::to_string(v.i);
      case Value::UInt:
        return std::to_string(v.u);
      case Value::Float:
        return fmt("%.*f", v.f);
    }
    return "";
  }

  bool floating_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t max_width_ = 1;
};

// Walks a CPU tensor in logical order with its real strides.
class Printer {
 public:
  explicit Printer(const Tensor& t)
      : t_(t),
        sizes_(t.impl()->int_sizes()),
        strides_(t.impl()->int_strides()),
        base_(static_cast<const char*>(t.impl()->data())) {}

  // The values the formatter sees: all, or the edge items when summarizing.
  void collect(int64_t dim, int64_t off, bool summarize, std::vector<Value>& out) const {
    if (dim == t_.dim()) {
      out.push_back(read_value(t_, base_, off));
      return;
    }
    const int64_t n = sizes_[dim];
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
      collect(dim + 1, off + i * strides_[dim], summarize, out);
    }
  }

  std::string str(int64_t dim, int64_t off, int indent, bool summarize, const Formatter& f) const {
    const int64_t n = sizes_[dim];
    const int64_t rank_left = t_.dim() - dim;
    if (rank_left == 1) {
      std::vector<std::string> data;
      for (int64_t i = 0; i < n; ++i) {
        if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
          data.push_back(" ...");
          i = n - kEdgeItems;
        }
        data.push_back(f.format(read_value(t_, base_, off + i * strides_[dim])));
      }
      const size_t element_length = f.width() + 2;
      const size_t per_line =
          std::max<size_t>(1, static_cast<size_t>((kLineWidth - indent) / element_length));
      std::string s = "[";
      for (size_t i = 0; i < data.size(); ++i) {
        if (i > 0) s += (i % per_line == 0) ? ",\n" + std::string(indent + 1, ' ') : ", ";
        s += data[i];
      }
      return s + "]";
    }
    std::vector<std::string> slices;
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        slices.push_back("...");
        i = n - kEdgeItems;
      }
      slices.push_back(str(dim + 1, off + i * strides_[dim], indent + 1, summarize, f));
    }
    const std::string sep = "," + std::string(rank_left - 1, '\n') + std::string(indent + 1, ' ');
    std::string s = "[";
    for (size_t i = 0; i < slices.size(); ++i) s += (i ? sep : "") + slices[i];
    return s + "]";
  }

 private:
  const Tensor& t_;
  IntArrayRef sizes_, strides_;
  const char* base_;
};

std::string shape_tuple(const Tensor& t) {
  std::ostringstream os;
  os << "(";
  for (int64_t d = 0; d < t.dim(); ++d) os << (d ? ", " : "") << t.sizes()[d];
  if (t.dim() == 1) os << ",";
  os << ")";
  return os.str();
}

std::string add_suffixes(const std::string& body, const std::vector<std::string>& suffixes,
                         int indent) {
  std::string out = body;
  const size_t nl = body.rfind('\n');
  const int64_t last_nl = nl == std::string::npos ? -1 : static_cast<int64_t>(nl);
  size_t last_line_len = static_cast<size_t>(static_cast<int64_t>(body.size()) - last_nl + 1);
  for (const auto& s : suffixes) {
    if (last_line_len + s.size() + 2 > static_cast<size_t>(kLineWidth)) {
      out += ",\n" + std::string(indent, ' ') + s;
      last_line_len = indent + s.size();
    } else {
      out += ", " + s;
      last_line_len += s.size() + 2;
    }
  }
  return out + ")";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = is_fake() ? "FakeTensor(" : "tensor(";
  const int indent = static_cast<int>(prefix.size());
  std::vector<std::string> suffixes;
  if (!device().is_cpu()) suffixes.push_back("device='" + device().str() + "'");
  const bool default_dtype =
      dtype() == DType::Float32 || dtype() == DType::Int64 || dtype() == DType::Bool;
  std::string body;
  if (!has_data()) {
    suffixes.push_back("size=" + shape_tuple(*this));
    if (dtype() != DType::Float32)
      suffixes.push_back("dtype=tessera." + std::string(dtype_name(dtype())));
    body = "...";
  } else if (numel() == 0) {
    if (dim() != 1) suffixes.push_back("size=" + shape_tuple(*this));
    if (dtype() != DType::Float32)
      suffixes.push_back("dtype=tessera." + std::string(dtype_name(dtype())));
    body = "[]";
  } else {
    if (!default_dtype) suffixes.push_back("dtype=tessera." + std::string(dtype_name(dtype())));
    const Tensor host = device().is_cuda() ? to(kCPU) : *this;
    TS_CHECK(host.device().is_cpu(), NotImplementedError) << "[print] tensors on " << device();
    Printer p(host);
    const bool summarize = numel().expect_int() > kThreshold;
    std::vector<Value> values;
    p.collect(0, 0, summarize, values);
    Formatter f(tessera::is_floating_point(dtype()), values);
    if (dim() == 0) {
      body = f.format(values[0]);
    } else {
      body = p.str(0, 0, indent, summarize, f);
    }
  }
  // As PyTorch: the backward node of a recorded result, or a leaf's requires_grad.
  if (const std::string fn = grad_fn_name(); !fn.empty()) {
    suffixes.push_back("grad_fn=<" + fn + ">");
  } else if (requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  return add_suffixes(prefix + body, suffixes, indent);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << t.str();
}

}  // namespace tessera
