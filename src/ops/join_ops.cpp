// cat, stack, index_select, index_add, embedding.
#include <cstring>

#include "ops/cpu_loops.h"
#include "ops/device_copy.h"
#include "ops/pointwise.h"
#include "ops/pointwise_functors.h"
#include "ops/register.h"

namespace tessera {
namespace {

using namespace ops_detail;

// PyTorch skips legacy 1-D empty tensors (shape [0]) in cat.
bool skipped_in_cat(const Tensor& t) {
  return t.dim() == 1 && t.sizes()[0] == 0;
}

struct CatPlan {
  SymDimVector shape;
  DType dtype;
  int64_t dim;
  const Tensor* like;
};

CatPlan plan_cat(TensorList tensors, int64_t dim) {
  TS_CHECK(!tensors.empty(), ValueError) << "[cat] expected a non-empty list of tensors";
  const Tensor* ref = nullptr;
  for (const auto& t : tensors) {
    if (!skipped_in_cat(t)) {
      ref = &t;
      break;
    }
  }
  CatPlan p;
  ResultType rt;
  for (const auto& t : tensors) rt.add(t.dtype(), OperandKind::Tensor);
  p.dtype = rt.result();
  p.like = &tensors[0];
  for (const auto& t : tensors) {
    if (!t.has_data()) p.like = &t;
  }
  if (!ref) {
    p.shape = SymDimVector{SymInt(0)};
    p.dim = 0;
    return p;
  }
  TS_CHECK(ref->dim() > 0, ShapeError) << "[cat] zero-dimensional tensor cannot be concatenated";
  p.dim = detail::wrap_dim(dim, ref->dim(), "cat");
  p.shape = SymDimVector(ref->sizes());
  SymInt total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped_in_cat(t)) continue;
    TS_CHECK(t.dim() == ref->dim(), ShapeError)
        << "[cat] tensors must have same number of dimensions: got " << ref->dim() << " and "
        << t.dim() << " (tensor " << i << ")";
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d == p.dim) continue;
      TS_CHECK(t.sizes()[d] == ref->sizes()[d], ShapeError)
          << "[cat] sizes of tensors must match except in dimension " << p.dim << ". Expected size "
          << ref->sizes()[d] << " but got size " << t.sizes()[d] << " for tensor number " << i
          << " in the list";
    }
    total = total + t.sizes()[p.dim];
  }
  p.shape[p.dim] = total;
  return p;
}

void cat_into(const Tensor& out, TensorList tensors, const CatPlan& p) {
  SymInt offset = 0;
  for (const auto& t : tensors) {
    if (skipped_in_cat(t)) continue;
    TS_CHECK(t.has_data(), ValueError) << "[cat] mixes tensors with and without data";
    const SymInt n = t.sizes()[p.dim];
    SymDimVector sizes(out.sizes());
    sizes[p.dim] = n;
    const Tensor slot = detail::make_view(out, sizes, out.strides(),
                                          out.storage_offset() + offset * out.strides()[p.dim]);
    if (slot.device().is_cpu())
      cpu_copy(slot, t);
    else
      copy_between(slot, t);  // GPU tensors: cuMemcpy when dense, else the tile copy kernel
    offset = offset + n;
  }
}

Tensor cat_impl(TensorList tensors, int64_t dim) {
  for (size_t i = 1; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].device() == tensors[0].device(), DeviceError)
        << "[cat] expected all tensors to be on the same device, but found " << tensors[0].device()
        << " and " << tensors[i].device();
  }
  const CatPlan p = plan_cat(tensors, dim);
  Tensor out = new_output(*p.like, p.shape, p.dtype);
  if (out.has_data()) cat_into(out, tensors, p);
  return out;
}

Tensor& cat_out_impl(TensorList tensors, int64_t dim, Tensor& out) {
  const CatPlan p = plan_cat(tensors, dim);
  for (const auto& t : tensors) {
    TS_CHECK(!out.is_alias_of(t), ValueError) << "[cat] out= must not alias an input";
  }
  return write_out(out, p.shape, p.dtype, "cat", tensors,
                   [&](const Tensor& target) { cat_into(target, tensors, p); });
}

Tensor stack_composite(TensorList tensors, int64_t dim) {
  TS_CHECK(!tensors.empty(), ValueError) << "[stack] expects a non-empty TensorList";
  for (size_t i = 1; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].sizes().equals(tensors[0].sizes()), ShapeError)
        << "[stack] expects each tensor to be equal size, but got " << tensors[0].sizes()
        << " at entry 0 and " << tensors[i].sizes() << " at entry " << i;
  }
  dim = detail::wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const auto& t : tensors) parts.push_back(t.unsqueeze(dim));
  return cat(parts, dim);
}

// The geometry an index_select / index_add loop needs: A outer rows, S positions along `dim`, B
// inner elements, and the checked (int64, contiguous) indices.
struct IndexedDim {
  int64_t A = 1, S = 1, B = 1, I = 0;
  Tensor idx;
  const int64_t* ip = nullptr;
};

void check_index_arg(const char* op, const Tensor& index) {
  TS_CHECK(index.dim() <= 1, ShapeError)
      << "[" << op << "] index must be 0-D or 1-D, got " << index.dim() << "-D";
  TS_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, DTypeError)
      << "[" << op << "] expected index of dtype int64 or int32, got " << dtype_name(index.dtype());
}

void check_in_range(const char* op, int64_t i, int64_t dim, int64_t size) {
  TS_CHECK(i >= -size && i < size, IndexError)
      << "[" << op << "] index " << i << " is out of range for dimension " << dim << " with size "
      << size;
}

// The indices as int64, contiguous, on the CPU (`ip` points at them) or, with `device`, on the
// tensor's device (where their range is checked from their minimum and maximum, read back).
IndexedDim indexed_dim(const char* op, const Tensor& t, int64_t dim, const Tensor& index,
                       bool device = false) {
  IndexedDim r;
  const auto sizes = t.impl()->int_sizes();
  for (int64_t d = 0; d < dim; ++d) r.A *= sizes[d];
  for (int64_t d = dim + 1; d < t.dim(); ++d) r.B *= sizes[d];
  r.S = t.dim() > 0 ? sizes[dim] : 1;
  if (device) {
    r.idx = index.to(DType::Int64).reshape({-1}).contiguous();
    r.I = r.idx.impl()->int_numel();
    if (r.I > 0) {
      const Tensor ends = stack({tessera::min(r.idx), tessera::max(r.idx)}).cpu();
      const int64_t* e = static_cast<const int64_t*>(ends.impl()->data());
      check_in_range(op, e[0], dim, r.S);
      check_in_range(op, e[1], dim, r.S);
    }
    return r;
  }
  r.idx = cpu_contiguous(cpu_to_dtype(index, DType::Int64));
  r.I = r.idx.impl()->int_numel();
  r.ip = static_cast<const int64_t*>(r.idx.impl()->data());
  for (int64_t i = 0; i < r.I; ++i) check_in_range(op, r.ip[i], dim, r.S);
  return r;
}

// GPU tensors (and CPU ones under ScopedThroughTiles) go through the tile lowering.
bool on_device(const Tensor& out) {
  return !out.device().is_cpu() || through_tiles();
}

Tensor index_select_impl(const Tensor& self, int64_t dim, const Tensor& index) {
  check_index_arg("index_select", index);
  dim = detail::wrap_dim(dim, self.dim(), "index_select");
  SymDimVector shape(self.sizes());
  if (self.dim() > 0) shape[dim] = index.numel();
  check_same_device("index_select", {&self, &index});
  Tensor out = new_output(self.has_data() ? index : self, shape, self.dtype());
  if (!out.has_data() || !self.has_data()) return out;
  if (on_device(out)) {
    const Tensor src = self.contiguous();
    const IndexedDim g = indexed_dim("index_select", src, dim, index, true);
    if (out.numel() > 0 && g.I > 0) {
      run_device_index(IndexOp::Gather, src, g.idx, out, {g.A, g.S, g.B, g.I}, Scalar(1),
                       "index_select");
    }
    return out;
  }
  const Tensor src = cpu_contiguous(self);
  const IndexedDim g = indexed_dim("index_select", src, dim, index);
  const int64_t A = g.A, B = g.B, S = g.S, I = g.I;
  const int64_t* ip = g.ip;
  const size_t row = static_cast<size_t>(B) * src.itemsize();
  const char* sp = static_cast<const char*>(src.impl()->data());
  char* op = static_cast<char*>(out.impl()->data());
  runtime::parallel_for(0, A * I, std::max<int64_t>(1, 4096 / std::max<int64_t>(B, 1)),
                        [&](int64_t b, int64_t e) {
                          for (int64_t k = b; k < e; ++k) {
                            const int64_t a = k / I, i = k % I;
                            const int64_t s = ip[i] < 0 ? ip[i] + S : ip[i];
                            std::memcpy(op + static_cast<size_t>(k) * row,
                                        sp + static_cast<size_t>(a * S + s) * row, row);
                          }
                        });
  return out;
}

// out = self with alpha * source added at `index` along `dim` (repeated indices accumulate).
Tensor index_add_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                      const Scalar& alpha) {
  check_index_arg("index_add", index);
  TS_CHECK(source.dtype() == self.dtype(), DTypeError)
      << "[index_add] source has dtype " << dtype_name(source.dtype()) << ", self has "
      << dtype_name(self.dtype());
  dim = detail::wrap_dim(dim, std::max<int64_t>(self.dim(), 1), "index_add");
  TS_CHECK(
      source.dim() == std::max<int64_t>(self.dim(), 1) || (self.dim() == 0 && source.dim() <= 1),
      ShapeError)
      << "[index_add] source must have as many dimensions as self (" << self.dim() << "), got "
      << source.dim();
  for (int64_t d = 0; d < self.dim(); ++d) {
    const SymInt want = d == dim ? index.numel() : self.sizes()[d];
    TS_CHECK(source.sizes()[d] == want, ShapeError)
        << "[index_add] source has shape " << source.sizes() << "; expected size " << want
        << " in dimension " << d << " (self " << self.sizes() << ", " << index.numel()
        << " indices)";
  }
  check_same_device("index_add", {&self, &index, &source});
  // Any fake operand (a trace: a backward's zeros are real, its gradient fake) makes the result
  // fake, of self's shape.
  const Tensor& like = !source.has_data() ? source : !index.has_data() ? index : self;
  Tensor out = new_output(like, self.sizes(), self.dtype());
  if (!out.has_data() || !self.has_data()) return out;
  out.copy_(self);
  if (on_device(out)) {
    TS_CHECK(out.dtype() != DType::Bool, DTypeError) << "[index_add] is not defined for bool";
    const Tensor src = source.contiguous();
    const IndexedDim g = indexed_dim("index_add", out, dim, index, true);
    if (src.numel() > 0) {
      run_device_index(IndexOp::Add, src, g.idx, out, {g.A, g.S, g.B, g.I}, alpha, "index_add");
    }
    return out;
  }
  const Tensor src = cpu_contiguous(source);
  const IndexedDim g = indexed_dim("index_add", out, dim, index);
  const int64_t A = g.A, B = g.B, S = g.S, I = g.I;
  const int64_t* ip = g.ip;
  visit_dtype<kNumeric>(out.dtype(), "index_add", [&]<class T>() {
    using Acc = std::conditional_t<is_narrow_float_v<T>, float, T>;
    const Acc a = alpha.to<Acc>();
    const T* sp = static_cast<const T*>(src.impl()->data());
    T* op = static_cast<T*>(out.impl()->data());
    // Rows of different `a` never collide: parallel over them, indices in order within one.
    runtime::parallel_for(
        0, A, std::max<int64_t>(1, 4096 / std::max<int64_t>(I * B, 1)), [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) {
            for (int64_t i = 0; i < I; ++i) {
              const int64_t s = ip[i] < 0 ? ip[i] + S : ip[i];
              T* dst = op + (r * S + s) * B;
              const T* from = sp + (r * I + i) * B;
              for (int64_t k = 0; k < B; ++k) {
                if constexpr (std::is_integral_v<T>) {  // integers wrap, never undefined
                  dst[k] = pw::wrap_add(dst[k], pw::wrap_mul(static_cast<T>(a), from[k]));
                } else {
                  dst[k] = static_cast<T>(static_cast<Acc>(dst[k]) + a * static_cast<Acc>(from[k]));
                }
              }
            }
          }
        });
  });
  return out;
}

Tensor embedding_composite(const Tensor& weight, const Tensor& indices) {
  TS_CHECK(weight.dim() == 2, ShapeError)
      << "[embedding] weight must be 2-D, got " << weight.dim() << "-D";
  SymDimVector shape(indices.sizes());
  shape.push_back(weight.sizes()[1]);
  return index_select(weight, 0, indices.reshape({-1})).view(shape);
}

}  // namespace

TS_REGISTER_OPS(join_ops) {
  Library lib("aten");
  lib.def("cat(Tensor[] tensors, int dim=0) -> Tensor", kBuiltin);
  lib.def("cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)", kBuiltin);
  lib.def("stack(Tensor[] tensors, int dim=0) -> Tensor", kBuiltin);
  lib.def("index_select(Tensor self, int dim, Tensor index) -> Tensor", kBuiltin);
  lib.def(
      "index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor",
      kBuiltin);
  lib.def("embedding(Tensor weight, Tensor indices) -> Tensor", kBuiltin);
  for (auto dev : {DeviceType::CPU, DeviceType::Meta}) {
    lib.impl("cat", dev, cat_impl);
    lib.impl("cat.out", dev, cat_out_impl);
    lib.impl("index_select", dev, index_select_impl);
    lib.impl("index_add", dev, index_add_impl);
  }
  lib.impl("index_select", DeviceType::CUDA, index_select_impl);
  lib.impl("index_add", DeviceType::CUDA, index_add_impl);
  lib.impl("cat", DeviceType::CUDA, cat_impl);
  lib.impl("cat.out", DeviceType::CUDA, cat_out_impl);
  lib.composite("stack", stack_composite);
  lib.composite("embedding", embedding_composite);
}

Tensor cat(TensorList tensors, int64_t dim, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::cat", Tensor(TensorList, int64_t), tensors, dim);
}
Tensor& cat_out(Tensor& out, TensorList tensors, int64_t dim, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::cat.out", Tensor & (TensorList, int64_t, Tensor&), tensors, dim, out);
}
Tensor stack(TensorList tensors, int64_t dim, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::stack", Tensor(TensorList, int64_t), tensors, dim);
}
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::index_select", Tensor(const Tensor&, int64_t, const Tensor&), a, dim, index);
}
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::index_add",
          Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&, const Scalar&), self, dim,
          index, source, alpha);
}
Tensor embedding(const Tensor& weight, const Tensor& indices, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::embedding", Tensor(const Tensor&, const Tensor&), weight, indices);
}

}  // namespace tessera
