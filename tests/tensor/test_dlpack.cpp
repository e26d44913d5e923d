// DLPack import and export (include/tessera/dlpack.h): zero-copy both ways, the producer's
// deleter called exactly once and only when the last view dies, every dtype, and each malformed
// input a typed error that still returns the memory to its producer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "tessera/dlpack.h"
#include "tessera/tessera.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// A producer: a malloc'd float buffer in a versioned managed tensor that counts its deleter.
struct Producer {
  static inline int deleted = 0;
  std::vector<int64_t> shape, strides;
  float* data = nullptr;
  DLManagedTensorVersioned m{};

  static DLManagedTensorVersioned* make(std::vector<int64_t> shape, std::vector<int64_t> strides,
                                        size_t elems, uint64_t byte_offset = 0) {
    auto* p = new Producer();
    p->shape = std::move(shape);
    p->strides = std::move(strides);
    p->data = static_cast<float*>(std::malloc(elems * sizeof(float)));
    for (size_t i = 0; i < elems; ++i) p->data[i] = static_cast<float>(i);
    p->m.version = {1, 1};
    p->m.manager_ctx = p;
    p->m.deleter = [](DLManagedTensorVersioned* self) {
      auto* owner = static_cast<Producer*>(self->manager_ctx);
      std::free(owner->data);
      delete owner;
      ++deleted;
    };
    DLTensor& t = p->m.dl_tensor;
    t.data = p->data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(p->shape.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = p->shape.data();
    t.strides = p->strides.empty() ? nullptr : p->strides.data();
    t.byte_offset = byte_offset;
    return &p->m;
  }
};

TEST(DLPack, ImportSharesTheProducersMemoryAndReleasesItOnce) {
  Producer::deleted = 0;
  // A 3x2 view with strides (4, 2) starting at element 1 of a 12-float buffer.
  DLManagedTensorVersioned* m = Producer::make({3, 2}, {4, 2}, 12, sizeof(float));
  auto* data = static_cast<float*>(m->dl_tensor.data);
  {
    Tensor t = from_dlpack(m);
    EXPECT_EQ(t.device(), kCPU);
    EXPECT_EQ(t.dtype(), DType::Float32);
    EXPECT_TRUE(t.equal(from_vector(std::vector<float>{1, 3, 5, 7, 9, 11}, {3, 2})));
    Tensor view = t.t();  // another view of the same memory
    t = Tensor();
    EXPECT_EQ(Producer::deleted, 0);  // the view still holds it
    view.fill_(-1);
    EXPECT_EQ(data[1], -1);  // no copy: writes reach the producer's buffer
    EXPECT_EQ(data[2], 2);   // outside the view: untouched
  }
  EXPECT_EQ(Producer::deleted, 1);
  // Null strides: compact row-major.
  Tensor c = from_dlpack(Producer::make({2, 3}, {}, 6));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c[1][2].item<float>(), 5);
}

TEST(DLPack, ExportThenImportIsTheSameMemoryForEveryDtype) {
  for (DType d : {DType::Bool, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8,
                  DType::UInt16, DType::UInt32, DType::UInt64, DType::Float16, DType::BFloat16,
                  DType::Float32, DType::Float64, DType::Float8_e4m3fn, DType::Float8_e5m2}) {
    const Tensor base = random_tensor({4, 6}, d);
    const Tensor view = base.slice(1, 1, 5, 2).t();  // strided, offset, transposed
    DLManagedTensorVersioned* m = to_dlpack_versioned(view);
    EXPECT_EQ(m->version.major, 1u);
    EXPECT_EQ(m->dl_tensor.ndim, 2);
    EXPECT_EQ(m->dl_tensor.strides[0], 2) << dtype_name(d);
    EXPECT_EQ(m->dl_tensor.data, view.impl()->data());
    const Tensor back = from_dlpack(m);
    EXPECT_EQ(back.dtype(), d);
    EXPECT_EQ(back.impl()->data(), view.impl()->data()) << dtype_name(d);
    EXPECT_TRUE(back.strides().equals(view.strides()));
    EXPECT_TRUE(bitwise_equal(back, view)) << dtype_name(d);
  }
  // The legacy struct too; the export keeps the storage alive after the tensor is gone.
  DLManagedTensor* legacy = nullptr;
  {
    Tensor t = arange(10);
    legacy = to_dlpack(t);
  }
  const Tensor u = from_dlpack(legacy);
  EXPECT_TRUE(u.equal(arange(10)));
}

TEST(DLPack, MalformedInputIsATypedErrorAndTheMemoryGoesBack) {
  Producer::deleted = 0;
  auto expect = [](DLManagedTensorVersioned* m, const char* text) {
    const int before = Producer::deleted;
    const std::string err = error_of([&] { from_dlpack(m); });
    EXPECT_NE(err.find(text), std::string::npos) << err;
    EXPECT_NE(err.find("[from_dlpack]"), std::string::npos) << err;
    EXPECT_EQ(Producer::deleted, before + 1) << text;  // released, exactly once
  };
  DLManagedTensorVersioned* m = Producer::make({4}, {}, 4);
  m->version.major = 2;
  expect(m, "DLPack major version 2");
  m = Producer::make({4}, {}, 4);
  m->dl_tensor.dtype.lanes = 4;
  expect(m, "4 lanes");
  m = Producer::make({4}, {}, 4);
  m->dl_tensor.dtype = {kDLComplex, 64, 1};
  expect(m, "has no tessera dtype");
  m = Producer::make({4}, {}, 4);
  m->dl_tensor.device = {kDLROCM, 0};
  expect(m, "DLPack device type 10");
  m = Producer::make({2}, {-1}, 4);
  expect(m, "negative stride");
  m = Producer::make({2}, {}, 4, 2);
  expect(m, "byte_offset 2 is not a whole number of float32 elements");
  EXPECT_NE(error_of([] {
              to_dlpack_versioned(empty({3}, TensorOptions().device(kMeta)));
            }).find("[to_dlpack] a meta tensor has no memory to share"),
            std::string::npos);
}

TEST(DLPack, AReadOnlyTensorIsCopied) {
  Producer::deleted = 0;
  DLManagedTensorVersioned* m = Producer::make({5}, {}, 5);
  m->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  Tensor t = from_dlpack(m);
  EXPECT_EQ(Producer::deleted, 1);  // copied, the producer's memory released at once
  t.fill_(3);
  EXPECT_TRUE(t.equal(full({5}, 3.0f)));
}

}  // namespace
