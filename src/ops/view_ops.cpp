// View operators: new geometry over the same storage, on any device (one kernel serves CPU, CUDA,
// meta and fake tensors). reshape, flatten, unflatten, movedim, expand_as and contiguous are
// decompositions into these.
#include <algorithm>
#include <numeric>
#include <sstream>

#include "ops/register.h"

namespace tessera {
namespace {

using namespace ops_detail;

SymDimVector infer_size(SymIntArrayRef shape, const SymInt& numel, const char* op) {
  SymDimVector out(shape);
  int64_t infer = -1;
  SymInt known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (auto v = shape[i].maybe_as_int(); v && *v == -1) {
      TS_CHECK(infer < 0, ShapeError) << "[" << op << "] only one dimension can be inferred";
      infer = static_cast<int64_t>(i);
    } else {
      if (auto v2 = shape[i].maybe_as_int()) {
        TS_CHECK(*v2 >= 0, ShapeError) << "[" << op << "] invalid shape dimension " << *v2;
      }
      known = known * shape[i];
    }
  }
  if (infer >= 0) {
    TS_CHECK(!(known == 0), ShapeError)
        << "[" << op << "] cannot reshape tensor of " << numel << " elements into shape " << shape
        << " because the unspecified dimension size -1 can be any value and is ambiguous";
    TS_CHECK(mod(numel, known) == 0, ShapeError)
        << "[" << op << "] shape '" << shape << "' is invalid for input of size " << numel;
    out[infer] = floordiv(numel, known);
  } else {
    TS_CHECK(known == numel, ShapeError)
        << "[" << op << "] shape '" << shape << "' is invalid for input of size " << numel;
  }
  return out;
}

// Strides that let `new_shape` view memory laid out as (old_shape, old_strides), or nullopt.
// Dimensions of the old shape are grouped into runs that are contiguous with each other; each
// run must map onto a run of new dimensions with the same element count.
std::optional<SymDimVector> view_strides(SymIntArrayRef old_shape, SymIntArrayRef old_strides,
                                         SymIntArrayRef new_shape) {
  const SymInt numel = sym_product(old_shape);
  if (numel == 0) {
    if (old_shape.equals(new_shape)) return SymDimVector(old_strides);
    return contiguous_strides(new_shape);
  }
  SymDimVector strides(new_shape.size(), SymInt(0));
  if (old_shape.empty()) {
    // A scalar views as any all-ones shape.
    for (auto& s : strides) s = 1;
    return strides;
  }
  int64_t nd = static_cast<int64_t>(new_shape.size()) - 1;
  SymInt base_stride = old_strides.back();
  SymInt run_numel = 1, view_numel = 1;
  for (int64_t od = static_cast<int64_t>(old_shape.size()) - 1; od >= 0; --od) {
    run_numel = run_numel * old_shape[od];
    const bool run_ends =
        od == 0 || (!(old_shape[od - 1] == 1) && !(old_strides[od - 1] == run_numel * base_stride));
    if (!run_ends) continue;
    while (nd >= 0 && (view_numel < run_numel || new_shape[nd] == 1)) {
      strides[nd] = view_numel * base_stride;
      view_numel = view_numel * new_shape[nd];
      --nd;
    }
    if (!(view_numel == run_numel)) return std::nullopt;
    if (od > 0) {
      base_stride = old_strides[od - 1];
      run_numel = 1;
      view_numel = 1;
    }
  }
  if (nd != -1) return std::nullopt;
  return strides;
}

Tensor view_impl(const Tensor& self, SymIntArrayRef size) {
  const SymDimVector shape = infer_size(size, self.numel(), "view");
  auto strides = view_strides(self.sizes(), self.strides(), shape);
  TS_CHECK(strides.has_value(), ShapeError)
      << "[view] view size is not compatible with input tensor's size and stride (at least one "
      << "dimension spans across two contiguous subspaces); use .reshape(...) instead";
  return detail::make_view(self, shape, *strides, self.storage_offset());
}

Tensor view_dtype_impl(const Tensor& self, DType dtype) {
  const int64_t old_size = static_cast<int64_t>(itemsize(self.dtype()));
  const int64_t new_size = static_cast<int64_t>(itemsize(dtype));
  if (old_size == new_size) {
    IntrusivePtr<TensorImpl> impl(new TensorImpl(self.impl()->storage_ptr(), dtype, self.device()));
    impl->set_geometry(self.sizes(), self.strides(), self.storage_offset());
    impl->set_flag(kTensorNoData, !self.has_data());
    impl->set_flag(kTensorFake, self.is_fake());
    return Tensor(std::move(impl));
  }
  TS_CHECK(self.dim() > 0, ShapeError)
      << "[view] a zero-dimensional tensor cannot be viewed as a dtype of another size";
  TS_CHECK(self.stride(-1) == 1, ShapeError)
      << "[view] viewing as a dtype of another element size needs a last dimension of stride 1";
  SymDimVector sizes(self.sizes()), strides(self.strides());
  SymInt offset = self.storage_offset();
  if (new_size > old_size) {
    const int64_t ratio = new_size / old_size;
    TS_CHECK(mod(sizes.back(), ratio) == 0, ShapeError)
        << "[view] the last dimension (" << sizes.back() << ") must be divisible by " << ratio;
    TS_CHECK(mod(offset, ratio) == 0, ShapeError)
        << "[view] storage offset must be divisible by " << ratio;
    sizes.back() = floordiv(sizes.back(), ratio);
    for (size_t d = 0; d + 1 < strides.size(); ++d) {
      TS_CHECK(mod(strides[d], ratio) == 0, ShapeError)
          << "[view] stride " << strides[d] << " must be divisible by " << ratio;
      strides[d] = floordiv(strides[d], ratio);
    }
    offset = floordiv(offset, ratio);
  } else {
    const int64_t ratio = old_size / new_size;
    sizes.back() = sizes.back() * ratio;
    for (size_t d = 0; d + 1 < strides.size(); ++d) strides[d] = strides[d] * ratio;
    offset = offset * ratio;
  }
  IntrusivePtr<TensorImpl> impl(new TensorImpl(self.impl()->storage_ptr(), dtype, self.device()));
  impl->set_geometry(sizes, strides, offset);
  impl->set_flag(kTensorNoData, !self.has_data());
  impl->set_flag(kTensorFake, self.is_fake());
  return Tensor(std::move(impl));
}

Tensor permute_impl(const Tensor& self, IntArrayRef dims) {
  TS_CHECK(static_cast<int64_t>(dims.size()) == self.dim(), ShapeError)
      << "[permute] number of dims don't match: got " << dims.size() << " for a tensor of rank "
      << self.dim();
  const DimVector d = wrap_dims(dims, self.dim(), "permute");
  SymDimVector sizes, strides;
  for (int64_t i : d) {
    sizes.push_back(self.sizes()[i]);
    strides.push_back(self.strides()[i]);
  }
  return detail::make_view(self, sizes, strides, self.storage_offset());
}

Tensor transpose_impl(const Tensor& self, int64_t d0, int64_t d1) {
  const int64_t n = self.dim();
  d0 = detail::wrap_dim(d0, n, "transpose");
  d1 = detail::wrap_dim(d1, n, "transpose");
  if (n == 0) return detail::make_view(self, {}, {}, self.storage_offset());
  SymDimVector sizes(self.sizes()), strides(self.strides());
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides[d0], strides[d1]);
  return detail::make_view(self, sizes, strides, self.storage_offset());
}

Tensor narrow_impl(const Tensor& self, int64_t dim, SymInt start, SymInt length) {
  TS_CHECK(self.dim() > 0, IndexError) << "[narrow] cannot be applied to a 0-dim tensor";
  dim = detail::wrap_dim(dim, self.dim(), "narrow");
  const SymInt size = self.sizes()[dim];
  if (start < 0) start = start + size;
  TS_CHECK(start >= 0 && start <= size, IndexError)
      << "[narrow] start (" << start << ") out of range for dimension " << dim << " of size "
      << size;
  TS_CHECK(length >= 0 && start + length <= size, IndexError)
      << "[narrow] start (" << start << ") + length (" << length << ") exceeds dimension size ("
      << size << ")";
  SymDimVector sizes(self.sizes());
  sizes[dim] = length;
  return detail::make_view(self, sizes, self.strides(),
                           self.storage_offset() + start * self.strides()[dim]);
}

Tensor slice_impl(const Tensor& self, int64_t dim, std::optional<SymInt> start,
                  std::optional<SymInt> end, SymInt step) {
  TS_CHECK(self.dim() > 0, IndexError) << "[slice] cannot be applied to a 0-dim tensor";
  dim = detail::wrap_dim(dim, self.dim(), "slice");
  TS_CHECK(step > 0, ValueError) << "[slice] step must be positive, got " << step;
  const SymInt size = self.sizes()[dim];
  SymInt s = start.value_or(SymInt(0)), e = end.value_or(size);
  // Python semantics: negative from the end, then clamp to [0, size].
  if (s < 0) s = s + size;
  if (e < 0) e = e + size;
  if (s < 0) s = 0;
  if (s > size) s = size;
  if (e < s) e = s;
  if (e > size) e = size;
  SymDimVector sizes(self.sizes()), strides(self.strides());
  sizes[dim] = floordiv(e - s + step - 1, step);
  strides[dim] = strides[dim] * step;
  return detail::make_view(self, sizes, strides, self.storage_offset() + s * self.strides()[dim]);
}

Tensor select_impl(const Tensor& self, int64_t dim, SymInt index) {
  TS_CHECK(self.dim() > 0, IndexError) << "[select] cannot be applied to a 0-dim tensor";
  dim = detail::wrap_dim(dim, self.dim(), "select");
  const SymInt size = self.sizes()[dim];
  TS_CHECK(index >= -size && index < size, IndexError)
      << "[select] index " << index << " is out of bounds for dimension " << dim << " with size "
      << size;
  if (index < 0) index = index + size;
  SymDimVector sizes(self.sizes()), strides(self.strides());
  const SymInt offset = self.storage_offset() + index * strides[dim];
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return detail::make_view(self, sizes, strides, offset);
}

Tensor expand_impl(const Tensor& self, SymIntArrayRef size) {
  const int64_t nd = static_cast<int64_t>(size.size());
  TS_CHECK(nd >= self.dim(), ShapeError)
      << "[expand] the number of sizes provided (" << nd
      << ") must be greater or equal to the number of dimensions in the tensor (" << self.dim()
      << ")";
  SymDimVector sizes(size.size(), SymInt(0)), strides(size.size(), SymInt(0));
  const int64_t lead = nd - self.dim();
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t od = i - lead;
    SymInt target = size[i];
    if (od < 0) {
      TS_CHECK(target >= 0, ShapeError)
          << "[expand] the expanded size of the tensor (" << target
          << ") isn't allowed in a leading, non-existing dimension " << i;
      sizes[i] = target;
      strides[i] = 0;
      continue;
    }
    const SymInt& cur = self.sizes()[od];
    if (target == -1) target = cur;
    if (cur == target) {
      sizes[i] = cur;
      strides[i] = self.strides()[od];
    } else {
      TS_CHECK(cur == 1, ShapeError)
          << "[expand] the expanded size of the tensor (" << target
          << ") must match the existing size (" << cur << ") at non-singleton dimension " << i
          << ". Target sizes: " << size << ". Tensor sizes: " << self.sizes();
      sizes[i] = target;
      strides[i] = 0;
    }
  }
  return detail::make_view(self, sizes, strides, self.storage_offset());
}

Tensor unsqueeze_impl(const Tensor& self, int64_t dim) {
  dim = detail::wrap_dim(dim, self.dim() + 1, "unsqueeze");
  SymDimVector sizes(self.sizes()), strides(self.strides());
  const SymInt stride = dim >= self.dim() ? SymInt(1) : sizes[dim] * strides[dim];
  sizes.insert(sizes.begin() + dim, SymInt(1));
  strides.insert(strides.begin() + dim, stride);
  return detail::make_view(self, sizes, strides, self.storage_offset());
}

Tensor squeeze_impl(const Tensor& self) {
  SymDimVector sizes, strides;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (self.sizes()[d] == 1) continue;
    sizes.push_back(self.sizes()[d]);
    strides.push_back(self.strides()[d]);
  }
  return detail::make_view(self, sizes, strides, self.storage_offset());
}

Tensor squeeze_dim_impl(const Tensor& self, int64_t dim) {
  dim = detail::wrap_dim(dim, self.dim(), "squeeze");
  if (self.dim() == 0 || !(self.sizes()[dim] == 1)) {
    return detail::make_view(self, self.sizes(), self.strides(), self.storage_offset());
  }
  SymDimVector sizes(self.sizes()), strides(self.strides());
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return detail::make_view(self, sizes, strides, self.storage_offset());
}

Tensor as_strided_impl(const Tensor& self, SymIntArrayRef size, SymIntArrayRef stride,
                       std::optional<SymInt> offset) {
  TS_CHECK(size.size() == stride.size(), ShapeError)
      << "[as_strided] " << size.size() << " sizes but " << stride.size() << " strides";
  for (const auto& s : stride) {
    TS_CHECK(s >= 0, ShapeError) << "[as_strided] negative strides are not supported";
  }
  const SymInt off = offset.value_or(self.storage_offset());
  TS_CHECK(off >= 0, ShapeError) << "[as_strided] negative storage offset " << off;
  // The last element reached must lie inside the storage (when every number is concrete).
  const SymInt& nbytes = self.impl()->storage_ptr()->nbytes();
  bool concrete = !off.is_symbolic() && !nbytes.is_symbolic();
  int64_t last = concrete ? off.expect_int() : 0;
  bool empty_view = false;
  for (size_t d = 0; d < size.size() && concrete; ++d) {
    concrete = !size[d].is_symbolic() && !stride[d].is_symbolic();
    if (!concrete) break;
    if (size[d].expect_int() == 0) empty_view = true;
    last += (size[d].expect_int() - 1) * stride[d].expect_int();
  }
  if (concrete && !empty_view) {
    const int64_t elems = nbytes.expect_int() / static_cast<int64_t>(itemsize(self.dtype()));
    TS_CHECK(last < elems, ShapeError) << "[as_strided] the view reaches element " << last
                                       << " of a storage of " << elems << " elements";
  }
  return detail::make_view(self, size, stride, off);
}

Tensor alias_impl(const Tensor& self) {
  return detail::make_view(self, self.sizes(), self.strides(), self.storage_offset());
}

Tensor reshape_composite(const Tensor& self, SymIntArrayRef shape) {
  const SymDimVector sizes = infer_size(shape, self.numel(), "reshape");
  if (auto strides = view_strides(self.sizes(), self.strides(), sizes)) return self.view(sizes);
  return self.clone().view(sizes);
}

Tensor flatten_composite(const Tensor& self, int64_t start, int64_t end) {
  if (self.dim() == 0) return self.reshape({1});
  start = detail::wrap_dim(start, self.dim(), "flatten");
  end = detail::wrap_dim(end, self.dim(), "flatten");
  TS_CHECK(start <= end, ValueError)
      << "[flatten] start_dim (" << start << ") cannot come after end_dim (" << end << ")";
  if (start == end) return self;
  SymDimVector shape;
  SymInt merged = 1;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d < start || d > end) {
      shape.push_back(self.sizes()[d]);
    } else {
      merged = merged * self.sizes()[d];
      if (d == end) shape.push_back(merged);
    }
  }
  return self.reshape(shape);
}

Tensor unflatten_composite(const Tensor& self, int64_t dim, SymIntArrayRef sizes) {
  dim = detail::wrap_dim(dim, self.dim(), "unflatten");
  TS_CHECK(!sizes.empty(), ShapeError) << "[unflatten] sizes must be non-empty";
  SymDimVector shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d == dim) {
      const SymDimVector inferred = infer_size(sizes, self.sizes()[d], "unflatten");
      for (const auto& s : inferred) shape.push_back(s);
    } else {
      shape.push_back(self.sizes()[d]);
    }
  }
  return self.view(shape);
}

Tensor movedim_composite(const Tensor& self, int64_t src, int64_t dst) {
  const int64_t n = self.dim();
  src = detail::wrap_dim(src, n, "movedim");
  dst = detail::wrap_dim(dst, n, "movedim");
  DimVector order;
  for (int64_t d = 0; d < n; ++d) {
    if (d != src) order.push_back(d);
  }
  order.insert(order.begin() + dst, src);
  return self.permute(order);
}

Tensor contiguous_composite(const Tensor& self) {
  if (self.is_contiguous()) return self;
  return self.clone();
}

Tensor t_composite(const Tensor& self) {
  TS_CHECK(self.dim() <= 2, ShapeError)
      << "[t] expects a tensor with <= 2 dimensions, but self is " << self.dim() << "D";
  if (self.dim() < 2) return self.transpose(0, 0);
  return self.transpose(0, 1);
}

}  // namespace

TS_REGISTER_OPS(view_ops) {
  using namespace ops_detail;
  Library lib("aten");
  const uint32_t v = kBuiltin | kTagView;
  lib.def("view(Tensor(a) self, SymInt[] size) -> Tensor(a)", v);
  lib.impl_all("view", view_impl);
  lib.def("view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)", v);
  lib.impl_all("view.dtype", view_dtype_impl);
  lib.def("permute(Tensor(a) self, int[] dims) -> Tensor(a)", v);
  lib.impl_all("permute", permute_impl);
  lib.def("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", v);
  lib.impl_all("transpose.int", transpose_impl);
  lib.def("narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)", v);
  lib.impl_all("narrow", narrow_impl);
  lib.def(
      "slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt "
      "step=1) -> Tensor(a)",
      v);
  lib.impl_all("slice.Tensor", slice_impl);
  lib.def("select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", v);
  lib.impl_all("select.int", select_impl);
  lib.def("expand(Tensor(a) self, SymInt[] size) -> Tensor(a)", v);
  lib.impl_all("expand", expand_impl);
  lib.def("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", v);
  lib.impl_all("unsqueeze", unsqueeze_impl);
  lib.def("squeeze(Tensor(a) self) -> Tensor(a)", v);
  lib.impl_all("squeeze", squeeze_impl);
  lib.def("squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", v);
  lib.impl_all("squeeze.dim", squeeze_dim_impl);
  lib.def(
      "as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> "
      "Tensor(a)",
      v);
  lib.impl_all("as_strided", as_strided_impl);
  lib.def("alias(Tensor(a) self) -> Tensor(a)", v);
  lib.impl_all("alias", alias_impl);
  lib.def("detach(Tensor(a) self) -> Tensor(a)", v);
  lib.impl_all("detach", alias_impl);

  lib.def("reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", kBuiltin);
  lib.composite("reshape", reshape_composite);
  lib.def("flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)",
          kBuiltin);
  lib.composite("flatten.using_ints", flatten_composite);
  lib.def("unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)", kBuiltin);
  lib.composite("unflatten.int", unflatten_composite);
  lib.def("movedim.int(Tensor(a) self, int source, int destination) -> Tensor(a)", kBuiltin);
  lib.composite("movedim.int", movedim_composite);
  lib.def("contiguous(Tensor(a) self) -> Tensor(a)", kBuiltin);
  lib.composite("contiguous", contiguous_composite);
  lib.def("t(Tensor(a) self) -> Tensor(a)", kBuiltin);
  lib.composite("t", t_composite);
}

// ---- Tensor methods -------------------------------------------------------------------------

Tensor Tensor::view(SymIntArrayRef size, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::view", Tensor(const Tensor&, SymIntArrayRef), *this, size);
}
Tensor Tensor::view(DType dtype, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::view.dtype", Tensor(const Tensor&, DType), *this, dtype);
}
Tensor Tensor::reshape(SymIntArrayRef shape, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::reshape", Tensor(const Tensor&, SymIntArrayRef), *this, shape);
}
Tensor Tensor::permute(IntArrayRef dims, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::permute", Tensor(const Tensor&, IntArrayRef), *this, dims);
}
Tensor Tensor::transpose(int64_t dim0, int64_t dim1, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::transpose.int", Tensor(const Tensor&, int64_t, int64_t), *this, dim0, dim1);
}
Tensor Tensor::t(SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::t", Tensor(const Tensor&), *this);
}
Tensor Tensor::narrow(int64_t dim, SymInt start, SymInt length, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::narrow", Tensor(const Tensor&, int64_t, SymInt, SymInt), *this, dim, start,
          length);
}
Tensor Tensor::slice(int64_t dim, std::optional<SymInt> start, std::optional<SymInt> end,
                     SymInt step, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::slice.Tensor",
          Tensor(const Tensor&, int64_t, std::optional<SymInt>, std::optional<SymInt>, SymInt),
          *this, dim, start, end, step);
}
Tensor Tensor::select(int64_t dim, SymInt index, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::select.int", Tensor(const Tensor&, int64_t, SymInt), *this, dim, index);
}
Tensor Tensor::expand(SymIntArrayRef size, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::expand", Tensor(const Tensor&, SymIntArrayRef), *this, size);
}
Tensor Tensor::as_strided(SymIntArrayRef size, SymIntArrayRef stride,
                          std::optional<SymInt> storage_offset, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::as_strided",
          Tensor(const Tensor&, SymIntArrayRef, SymIntArrayRef, std::optional<SymInt>), *this, size,
          stride, storage_offset);
}
Tensor Tensor::expand_as(const Tensor& other, SourceLoc loc) const {
  return expand(other.sizes(), loc);
}
Tensor Tensor::unsqueeze(int64_t dim, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::unsqueeze", Tensor(const Tensor&, int64_t), *this, dim);
}
Tensor Tensor::squeeze(SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::squeeze", Tensor(const Tensor&), *this);
}
Tensor Tensor::squeeze(int64_t dim, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::squeeze.dim", Tensor(const Tensor&, int64_t), *this, dim);
}
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::flatten.using_ints", Tensor(const Tensor&, int64_t, int64_t), *this, start_dim,
          end_dim);
}
Tensor Tensor::unflatten(int64_t dim, SymIntArrayRef sizes, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::unflatten.int", Tensor(const Tensor&, int64_t, SymIntArrayRef), *this, dim, sizes);
}
Tensor Tensor::movedim(int64_t source, int64_t destination, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::movedim.int", Tensor(const Tensor&, int64_t, int64_t), *this, source, destination);
}
Tensor Tensor::contiguous(SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::contiguous", Tensor(const Tensor&), *this);
}
Tensor Tensor::detach(SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::detach", Tensor(const Tensor&), *this);
}

}  // namespace tessera
