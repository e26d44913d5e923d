// DLPack import and export (include/tessera/dlpack.h): tensors shared with other frameworks
// without copying, CPU and CUDA, with an event ordering the consumer's CUDA stream after ours.
#include "tessera/dlpack.h"

#include <memory>
#include <vector>

#include "runtime/cuda/context.h"
#include "tessera/error.h"
#include "tessera/tensor_impl.h"

namespace tessera {
namespace {

constexpr const char* kImport = "[from_dlpack] ";
constexpr const char* kExport = "[to_dlpack] ";

DLDataType to_dl(DType d) {
  DLDataType t{0, static_cast<uint8_t>(itemsize(d) * 8), 1};
  switch (d) {
    case DType::Bool:
      t.code = kDLBool;
      break;
    case DType::BFloat16:
      t.code = kDLBfloat;
      break;
    case DType::Float8_e4m3fn:
      t.code = kDLFloat8_e4m3fn;
      break;
    case DType::Float8_e5m2:
      t.code = kDLFloat8_e5m2;
      break;
    default:
      t.code = is_floating_point(d) ? kDLFloat : is_signed(d) ? kDLInt : kDLUInt;
      break;
  }
  return t;
}

// Every tessera dtype, for the reverse lookup.
constexpr DType kAll[] = {DType::Bool,    DType::Int8,          DType::Int16,      DType::Int32,
                          DType::Int64,   DType::UInt8,         DType::UInt16,     DType::UInt32,
                          DType::UInt64,  DType::Float16,       DType::BFloat16,   DType::Float32,
                          DType::Float64, DType::Float8_e4m3fn, DType::Float8_e5m2};

DType from_dl(DLDataType t) {
  TS_CHECK(t.lanes == 1, DTypeError)
      << kImport << "vector element types (" << t.lanes << " lanes) have no tessera dtype";
  for (DType d : kAll) {
    const DLDataType m = to_dl(d);
    if (m.code == t.code && m.bits == t.bits) return d;
  }
  TS_CHECK(false, DTypeError) << kImport << "DLPack element type (code " << int(t.code) << ", "
                              << int(t.bits) << " bits) has no tessera dtype";
  return DType::Float32;
}

Device from_dl(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory: the CPU reads it
      return kCPU;
    case kDLCUDA: {
      const int n = runtime::cuda::device_count();
      TS_CHECK(d.device_id >= 0 && d.device_id < n, DeviceError)
          << kImport << "a tensor on CUDA device " << d.device_id << ", but this process sees " << n
          << " CUDA device(s)";
      return Device(DeviceType::CUDA, static_cast<int8_t>(d.device_id));
    }
    default:
      TS_CHECK(false, DeviceError) << kImport << "DLPack device type " << int(d.device_type)
                                   << " is not one tessera runs on (CPU, CUDA host, CUDA)";
      return kCPU;
  }
}

// A view of `dl`'s memory; `release(ctx)` runs when the storage dies (null: never).
Tensor wrap(const DLTensor& dl, StorageImpl::Deleter release, void* ctx) {
  const DType dtype = from_dl(dl.dtype);
  const Device device = from_dl(dl.device);
  TS_CHECK(dl.ndim >= 0 && (dl.ndim == 0 || dl.shape != nullptr), ShapeError)
      << kImport << "ndim " << dl.ndim << " with " << (dl.shape ? "a" : "no") << " shape";
  const int64_t size = static_cast<int64_t>(itemsize(dtype));
  TS_CHECK(dl.byte_offset % static_cast<uint64_t>(size) == 0, ValueError)
      << kImport << "byte_offset " << dl.byte_offset << " is not a whole number of "
      << dtype_name(dtype) << " elements";
  const DimVector sizes(IntArrayRef(dl.shape, static_cast<size_t>(dl.ndim)));
  const DimVector strides =
      dl.strides ? DimVector(IntArrayRef(dl.strides, sizes.size())) : contiguous_int_strides(sizes);
  int64_t extent = 1;  // one past the largest element offset
  for (size_t d = 0; d < sizes.size(); ++d) {
    TS_CHECK(sizes[d] >= 0, ShapeError) << kImport << "negative size " << sizes[d];
    TS_CHECK(strides[d] >= 0, ShapeError)
        << kImport << "negative stride " << strides[d] << " (tessera views have none)";
    if (sizes[d] == 0) extent = 0;
  }
  if (extent != 0) {
    for (size_t d = 0; d < sizes.size(); ++d) extent += (sizes[d] - 1) * strides[d];
  }
  const int64_t offset = static_cast<int64_t>(dl.byte_offset) / size;
  auto storage = StorageImpl::wrap(dl.data, static_cast<size_t>((offset + extent) * size), device,
                                   release, ctx);
  IntrusivePtr<TensorImpl> impl(new TensorImpl(std::move(storage), dtype, device));
  impl->set_geometry(to_sym(IntArrayRef(sizes)), to_sym(IntArrayRef(strides)), offset);
  return Tensor(std::move(impl));
}

template <class Managed>
void release(void* ctx, void*) {
  auto* m = static_cast<Managed*>(ctx);
  if (m->deleter) m->deleter(m);
}

template <class Managed>
Tensor import(Managed* m, bool read_only) {
  TS_CHECK(m != nullptr, ValueError) << kImport << "got a null managed tensor";
  Tensor t;
  try {
    if (read_only) {
      // tessera tensors are writable: a read-only tensor is copied, the producer's memory freed.
      t = wrap(m->dl_tensor, nullptr, nullptr).clone();
      release<Managed>(m, nullptr);
      return t;
    }
    return wrap(m->dl_tensor, &release<Managed>, m);
  } catch (...) {
    release<Managed>(m, nullptr);  // nothing leaks: the producer gets its memory back
    throw;
  }
}

// What an exported tensor keeps alive: the tensor (its storage), its shape and strides.
struct Export {
  Tensor t;
  std::vector<int64_t> shape, strides;
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
};

Export* make_export(const Tensor& t, const DLPackExportOptions& o) {
  TS_CHECK(t.has_data(), ValueError)
      << kExport << "a " << (t.is_fake() ? "fake" : "meta") << " tensor has no memory to share";
  auto e = std::make_unique<Export>();
  e->t = t;
  const auto* impl = t.impl();
  e->shape.assign(impl->int_sizes().begin(), impl->int_sizes().end());
  e->strides.assign(impl->int_strides().begin(), impl->int_strides().end());
  DLTensor& dl = e->versioned.dl_tensor;
  dl.data = impl->data();
  dl.device = t.device().is_cuda() ? DLDevice{kDLCUDA, t.device().index()} : DLDevice{kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(e->shape.size());
  dl.dtype = to_dl(t.dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  dl.byte_offset = 0;
  e->legacy.dl_tensor = dl;
  if (t.device().is_cuda() && o.consumer_stream) {
    // The consumer's stream waits for the work queued on ours so far (no host blocking).
    const int dev = t.device().index();
    const runtime::cuda::Stream ours = runtime::cuda::current_stream(dev);
    const runtime::cuda::Stream theirs(dev,
                                       static_cast<runtime::cuda::CUstream>(o.consumer_stream));
    if (!(ours == theirs)) {
      runtime::cuda::Event ready(dev, /*timing=*/false);
      ready.record(ours);
      ready.block(theirs);
    }
  }
  return e.release();
}

}  // namespace

Tensor from_dlpack(DLManagedTensorVersioned* managed) {
  TS_CHECK(managed != nullptr, ValueError) << kImport << "got a null managed tensor";
  if (managed->version.major != DLPACK_MAJOR_VERSION) {
    const uint32_t major = managed->version.major;
    release<DLManagedTensorVersioned>(managed, nullptr);  // safe for any version, by the spec
    TS_CHECK(false, ValueError) << kImport << "DLPack major version " << major
                                << " (tessera reads version " << DLPACK_MAJOR_VERSION << ")";
  }
  return import(managed, (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
}

Tensor from_dlpack(DLManagedTensor* managed) {
  return import(managed, false);
}

DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t, DLPackExportOptions options) {
  Export* e = make_export(t, options);
  e->versioned.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  e->versioned.manager_ctx = e;
  e->versioned.flags = 0;
  e->versioned.deleter = [](DLManagedTensorVersioned* self) {
    delete static_cast<Export*>(self->manager_ctx);
  };
  return &e->versioned;
}

DLManagedTensor* to_dlpack(const Tensor& t, DLPackExportOptions options) {
  Export* e = make_export(t, options);
  e->legacy.manager_ctx = e;
  e->legacy.deleter = [](DLManagedTensor* self) { delete static_cast<Export*>(self->manager_ctx); };
  return &e->legacy;
}

}  // namespace tessera
