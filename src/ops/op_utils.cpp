#include "ops/op_utils.h"

#include <cstring>
#include <sstream>

#include "ops/cpu_loops.h"
#include "ops/cpu_rows.h"
#include "ops/device_copy.h"
#include "tessera/env.h"

namespace tessera::ops_detail {

SymDimVector broadcast_shapes(SymIntArrayRef a, SymIntArrayRef b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  SymDimVector out(n, SymInt(1));
  for (size_t i = 0; i < n; ++i) {
    const SymInt sa = i < a.size() ? a[a.size() - 1 - i] : SymInt(1);
    const SymInt sb = i < b.size() ? b[b.size() - 1 - i] : SymInt(1);
    SymInt r;
    if (sa == 1) {
      r = sb;
    } else if (sb == 1 || sa == sb) {
      r = sa;
    } else {
      TS_ERROR(ShapeError) << "[" << op << "] the size of tensor a (" << sa
                           << ") must match the size of tensor b (" << sb
                           << ") at non-singleton dimension " << (n - 1 - i) << " (shapes " << a
                           << " and " << b << ")";
    }
    out[n - 1 - i] = r;
  }
  return out;
}

Tensor broadcast_to(const Tensor& t, SymIntArrayRef shape) {
  if (t.sizes().equals(shape)) return t;
  const int64_t nd = static_cast<int64_t>(shape.size());
  TS_INTERNAL_ASSERT(nd >= t.dim()) << "broadcast_to a smaller rank";
  SymDimVector strides(shape.size(), SymInt(0));
  const int64_t lead = nd - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) {
    const SymInt& s = t.sizes()[d];
    strides[lead + d] = (s == 1 && !(shape[lead + d] == 1)) ? SymInt(0) : t.strides()[d];
  }
  return detail::make_view(t, shape, strides, t.storage_offset());
}

DType result_type(const Tensor& a, const Tensor& b) {
  ResultType r;
  r.add(a.dtype(), operand_kind(a));
  r.add(b.dtype(), operand_kind(b));
  return r.result();
}

DType result_type(const Tensor& a, const Scalar& b) {
  ResultType r;
  r.add(a.dtype(), operand_kind(a));
  r.add(b.dtype(), OperandKind::WrappedNumber);
  return r.result();
}

DType result_type(std::initializer_list<const Tensor*> ts) {
  ResultType r;
  for (const Tensor* t : ts) r.add(t->dtype(), operand_kind(*t));
  return r.result();
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  // The device of the first tensor that is not a CPU scalar; CPU scalars (0-dim) join any device.
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    const Device d = t->device();
    if (t->dim() == 0 && d.is_cpu()) continue;
    if (!first) {
      first = t;
      continue;
    }
    if (d == first->device()) continue;
    TS_ERROR(DeviceError) << "[" << op << "] expected all tensors to be on the same device, but "
                          << "found at least two devices, " << first->device() << " and " << d;
  }
}

void prepare_out(Tensor& out, SymIntArrayRef shape, DType result, const char* op) {
  TS_CHECK(out.defined(), ValueError) << "[" << op << "] out= tensor is undefined";
  TS_CHECK(can_cast(result, out.dtype()), DTypeError)
      << "[" << op << "] result type " << dtype_name(result)
      << " can't be cast to the desired output type " << dtype_name(out.dtype());
  if (out.sizes().equals(shape)) return;
  if (!(out.numel() == 0)) {
    std::ostringstream os;
    os << "[" << op << "] an output with one or more elements was resized since it had shape "
       << out.sizes() << ", which does not match the required output shape " << shape;
    warn_once(os.str());
  }
  out.resize_(shape);
}

Tensor& write_out(Tensor& out, SymIntArrayRef shape, DType result, const char* op,
                  ArrayRef<Tensor> inputs, FunctionRef<void(const Tensor&)> fill,
                  bool needs_contiguous) {
  prepare_out(out, shape, result, op);
  if (!out.has_data()) return out;
  for (const auto& t : inputs) check_no_partial_overlap(out, t, op);
  if (out.dtype() == result && (!needs_contiguous || out.is_contiguous())) {
    fill(out);
  } else {
    Tensor tmp = detail::make_empty(shape, result, out.device());
    fill(tmp);
    if (out.device().is_cpu())
      cpu_copy(out, tmp);
    else
      copy_between(out, tmp);
  }
  bump_version(out);
  return out;
}

namespace {
int64_t extent_bytes(const Tensor& t, int64_t& lo) {
  // [lo, hi) byte range the tensor can touch, relative to storage start.
  const int64_t item = static_cast<int64_t>(t.itemsize());
  lo = t.impl()->int_offset() * item;
  int64_t hi = lo + item;
  const auto sizes = t.impl()->int_sizes();
  const auto strides = t.impl()->int_strides();
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return lo;
    hi += (sizes[d] - 1) * strides[d] * item;
  }
  return hi;
}
}  // namespace

void check_no_partial_overlap(const Tensor& out, const Tensor& in, const char* op) {
  if (!out.has_data() || !in.has_data() || !out.is_alias_of(in)) return;
  if (out.impl()->has_symbolic_shape() || in.impl()->has_symbolic_shape()) return;
  const bool identical = out.sizes().equals(in.sizes()) && out.strides().equals(in.strides()) &&
                         out.storage_offset().expect_int() == in.storage_offset().expect_int() &&
                         out.dtype() == in.dtype();
  if (identical) return;
  int64_t olo, ilo;
  const int64_t ohi = extent_bytes(out, olo), ihi = extent_bytes(in, ilo);
  const bool disjoint = ohi <= ilo || ihi <= olo;
  TS_CHECK(disjoint, ValueError)
      << "[" << op << "] unsupported operation: some elements of the input tensor and the "
      << "written-to tensor refer to a single memory location; clone() the input first";
}

void cpu_copy(const Tensor& dst, const Tensor& src) {
  const Tensor s = broadcast_to(src, dst.sizes());
  cpu::StridedIter<2> it({&dst, &s});
  if (dst.dtype() == src.dtype() && it.inner_strides()[0] == static_cast<int64_t>(dst.itemsize()) &&
      it.inner_strides()[1] == it.inner_strides()[0]) {
    const int64_t item = static_cast<int64_t>(dst.itemsize());
    it.for_each([&](char** p, const int64_t*, int64_t n) {
      std::memcpy(p[0], p[1], static_cast<size_t>(n * item));
    });
    return;
  }
  visit_dtype<kAllDTypes>(dst.dtype(), "copy_", [&]<class D>() {
    visit_dtype<kAllDTypes>(src.dtype(), "copy_", [&]<class S>() {
      cpu::StridedIter<2> it2({&dst, &s});
      it2.for_each([&](char** p, const int64_t* st, int64_t n) {
        if (st[0] == sizeof(D) && st[1] == sizeof(S)) {
          D* __restrict o = reinterpret_cast<D*>(p[0]);
          const S* __restrict i = reinterpret_cast<const S*>(p[1]);
          // float16 / bfloat16 <-> float: the vectorized rows of cpu_rows.h (the same bits; this
          // loop, built for baseline x86-64, converted a float16 element at a time: 4x slower).
          constexpr bool narrow_s = std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>;
          constexpr bool narrow_d = std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>;
          if constexpr (std::is_same_v<D, float> && narrow_s) {
            narrow_row_to_float(reinterpret_cast<const uint16_t*>(i), o, n,
                                std::is_same_v<S, BFloat16>);
            return;
          }
          if constexpr (std::is_same_v<S, float> && narrow_d) {
            float_row_to_narrow(i, reinterpret_cast<uint16_t*>(o), n, std::is_same_v<D, BFloat16>);
            return;
          }
          for (int64_t k = 0; k < n; ++k) o[k] = convert<D>(i[k]);
        } else {
          for (int64_t k = 0; k < n; ++k) {
            *reinterpret_cast<D*>(p[0] + k * st[0]) =
                convert<D>(*reinterpret_cast<const S*>(p[1] + k * st[1]));
          }
        }
      });
    });
  });
}

Tensor cpu_to_dtype(const Tensor& src, DType dtype) {
  if (src.dtype() == dtype) return src;
  Tensor out = new_output(src, src.sizes(), dtype);
  if (out.has_data()) cpu_copy(out, src);
  return out;
}

Tensor cpu_contiguous(const Tensor& src) {
  if (src.is_contiguous()) return src;
  Tensor out = new_output(src, src.sizes(), src.dtype());
  if (out.has_data()) cpu_copy(out, src);
  return out;
}

void cpu_fill(const Tensor& dst, const Scalar& value) {
  visit_dtype<kAllDTypes>(dst.dtype(), "fill_", [&]<class D>() {
    D v;
    if (value.is_floating_point())
      v = convert<D>(value.to_double());
    else if (value.is_bool())
      v = convert<D>(value.to_bool());
    else
      v = convert<D>(value.to_int());
    cpu::StridedIter<1> it({&dst});
    it.for_each([&](char** p, const int64_t* st, int64_t n) {
      if (st[0] == sizeof(D)) {
        D* __restrict o = reinterpret_cast<D*>(p[0]);
        for (int64_t k = 0; k < n; ++k) o[k] = v;
      } else {
        for (int64_t k = 0; k < n; ++k) *reinterpret_cast<D*>(p[0] + k * st[0]) = v;
      }
    });
  });
}

DimVector wrap_dims(IntArrayRef dims, int64_t ndim, const char* op) {
  DimVector out;
  uint64_t seen = 0;
  for (int64_t d : dims) {
    const int64_t w = detail::wrap_dim(d, ndim, op);
    TS_CHECK(!(seen & (uint64_t(1) << w)), ValueError)
        << "[" << op << "] dim " << w << " appears multiple times in the list of dims";
    seen |= uint64_t(1) << w;
    out.push_back(w);
  }
  return out;
}

}  // namespace tessera::ops_detail
