#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "tessera/detail/philox.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {
std::string str(const Tensor& t) {
  return t.str();
}
Tensor fvec(std::vector<float> v) {
  return from_vector(v);
}
}  // namespace

TEST(Tensor, Metadata) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel().expect_int(), 24);
  EXPECT_EQ(t.size(-1).expect_int(), 4);
  EXPECT_EQ(t.stride(0).expect_int(), 12);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.dtype(), float32);
  EXPECT_TRUE(t.is_cpu());
  EXPECT_EQ(t.itemsize(), 4u);
  Tensor tt = t.transpose(0, 2);
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_TRUE(tt.is_alias_of(t));
  EXPECT_EQ(tt.stride(0).expect_int(), 1);
  EXPECT_THROW(t.size(3), IndexError);
}

TEST(Tensor, ViewsShareStorageAndVersion) {
  Tensor x = arange(0, 12, 1, float32);
  Tensor v = x.view({3, 4});
  Tensor row = v[1];
  EXPECT_EQ(row.storage_offset().expect_int(), 4);
  const uint32_t before = x.version();
  row.fill_(7);
  EXPECT_GT(x.version(), before);
  EXPECT_EQ(v.version(), x.version());
  EXPECT_EQ(x[5].item<float>(), 7.0f);
  EXPECT_EQ(x[8].item<float>(), 8.0f);
  row.add_(1);
  EXPECT_EQ(x[4].item<float>(), 8.0f);
}

TEST(Tensor, ViewOps) {
  Tensor x = arange(0, 24, 1, float32).view({2, 3, 4});
  EXPECT_TRUE(x.permute({2, 0, 1}).sizes().equals(SymDimVector{4, 2, 3}));
  EXPECT_EQ(x.permute({2, 0, 1})[3][1][2].item<float>(), x[1][2][3].item<float>());
  EXPECT_TRUE(x.narrow(2, 1, 2).sizes().equals(SymDimVector{2, 3, 2}));
  EXPECT_EQ(x.narrow(2, 1, 2)[0][0][0].item<float>(), 1.0f);
  EXPECT_EQ(x.slice(2, 1, std::nullopt, 2).size(2).expect_int(), 2);
  EXPECT_EQ(x.slice(2, 1, std::nullopt, 2)[0][0][1].item<float>(), 3.0f);
  EXPECT_EQ(x.slice(0, -1).size(0).expect_int(), 1);      // Python x[-1:]
  EXPECT_EQ(x.slice(1, 0, 100).size(1).expect_int(), 3);  // clamped
  EXPECT_EQ(x.slice(1, 2, 1).size(1).expect_int(), 0);    // empty
  EXPECT_EQ(x.select(1, -1)[0][0].item<float>(), 8.0f);
  Tensor e = arange(0, 3, 1, float32).view({3, 1}).expand({3, 4});
  EXPECT_EQ(e.stride(1).expect_int(), 0);
  EXPECT_EQ(e[2][3].item<float>(), 2.0f);
  EXPECT_TRUE(x.unsqueeze(1).sizes().equals(SymDimVector{2, 1, 3, 4}));
  EXPECT_TRUE(x.unsqueeze(-1).sizes().equals(SymDimVector{2, 3, 4, 1}));
  EXPECT_TRUE(zeros({1, 3, 1}).squeeze().sizes().equals(SymDimVector{3}));
  EXPECT_TRUE(zeros({1, 3, 1}).squeeze(0).sizes().equals(SymDimVector{3, 1}));
  EXPECT_TRUE(x.flatten(1).sizes().equals(SymDimVector{2, 12}));
  EXPECT_TRUE(x.flatten().sizes().equals(SymDimVector{24}));
  EXPECT_TRUE(x.flatten(0, 1).unflatten(0, {3, -1}).sizes().equals(SymDimVector{3, 2, 4}));
  EXPECT_TRUE(x.movedim(0, 2).sizes().equals(SymDimVector{3, 4, 2}));
  EXPECT_TRUE(x.view({-1, 4}).sizes().equals(SymDimVector{6, 4}));
}

TEST(Tensor, ViewVsReshape) {
  Tensor x = arange(0, 12, 1, float32).view({3, 4}).t();  // not contiguous
  EXPECT_THROW(x.view({12}), ShapeError);
  Tensor r = x.reshape({12});
  EXPECT_FALSE(r.is_alias_of(x));
  EXPECT_EQ(r[1].item<float>(), 4.0f);
  Tensor y = arange(0, 12, 1, float32).view({3, 4});
  EXPECT_TRUE(y.reshape({2, 6}).is_alias_of(y));
  // Views across non-contiguous but compatible strides.
  Tensor z = zeros({4, 6}).slice(1, 0, 3);
  EXPECT_NO_THROW(z.view({2, 2, 3}));
  EXPECT_THROW(z.view({12}), ShapeError);
  EXPECT_THROW(y.view({5, -1}), ShapeError);
  EXPECT_THROW(y.view({-1, -1}), ShapeError);
}

TEST(Tensor, ViewDtype) {
  Tensor x = from_vector(std::vector<float>{1.0f, -2.0f});
  Tensor bits = x.view(int32);
  EXPECT_EQ(bits[0].item<int64_t>(), 0x3f800000);
  Tensor halves = x.view(int16);
  EXPECT_EQ(halves.size(0).expect_int(), 4);
  EXPECT_EQ(halves.view(float32)[1].item<float>(), -2.0f);
}

TEST(Tensor, CopyCloneTo) {
  Tensor x = arange(0, 6, 1, float32).view({2, 3});
  Tensor c = x.clone();
  EXPECT_FALSE(c.is_alias_of(x));
  EXPECT_TRUE(equal(c, x));
  Tensor d = x.to(float64);
  EXPECT_EQ(d.dtype(), float64);
  EXPECT_TRUE(x.to(float32).is_same(x));  // no-op conversion returns self
  Tensor h = x.to(float16).to(int32);
  EXPECT_EQ(h[1][2].item<int64_t>(), 5);
  Tensor dst = zeros({2, 3}, int64);
  dst.copy_(x.t().t());
  EXPECT_EQ(dst[1][1].item<int64_t>(), 4);
  Tensor row = zeros({2, 3});
  row.copy_(fvec({1, 2, 3}));  // broadcast
  EXPECT_EQ(row[1][2].item<float>(), 3.0f);
  EXPECT_THROW(row.copy_(fvec({1, 2})), ShapeError);
  Tensor m = x.to(Device("meta"));
  EXPECT_TRUE(m.is_meta());
  if (cuda_is_available()) {
    EXPECT_TRUE(equal(x.to(Device("cuda")).cpu(), x));  // tests/cuda has the rest
  } else {
    EXPECT_THROW(x.to(Device("cuda")), DeviceError);  // "cuda:0 is not available: ..."
  }
}

TEST(Tensor, ResizeAndFill) {
  Tensor x = zeros({2});
  x.resize_({3, 4});
  EXPECT_TRUE(x.sizes().equals(SymDimVector{3, 4}));
  x.fill_(2);
  EXPECT_EQ(x.sum().item<float>(), 24.0f);
  x.zero_();
  EXPECT_EQ(x.sum().item<float>(), 0.0f);
  x.resize_({2});
  EXPECT_EQ(x.numel().expect_int(), 2);
}

TEST(Tensor, FromBlobWrapsWithoutCopy) {
  static int deleted = 0;
  float data[6] = {1, 2, 3, 4, 5, 6};
  {
    Tensor t = from_blob(data, {2, 3}, float32, {}, [](void*, void*) { ++deleted; });
    EXPECT_EQ(t.data_ptr(), static_cast<void*>(data));
    t[1][0].fill_(40);
    EXPECT_EQ(data[3], 40.0f);
    Tensor s = from_blob(data, {3}, float32, {2});
    EXPECT_EQ(s[2].item<float>(), 5.0f);
    EXPECT_THROW(t.resize_({100}), ValueError);
  }
  EXPECT_EQ(deleted, 1);
}

TEST(Tensor, ItemAndDataPtrChecks) {
  Tensor x = from_vector(std::vector<int32_t>{7});
  EXPECT_EQ(x.item<int>(), 7);
  EXPECT_TRUE(x.item().is_integral());
  EXPECT_NO_THROW(x.data_ptr<int32_t>());
  EXPECT_THROW(x.data_ptr<float>(), DTypeError);
  EXPECT_THROW(zeros({2}).item(), ValueError);
  EXPECT_THROW(zeros({1}, Device("meta")).item(), ValueError);
  EXPECT_THROW(zeros({1}, Device("meta")).data_ptr(), ValueError);
}

TEST(Tensor, FactoriesDefaultsAndOptions) {
  EXPECT_EQ(full({2}, 1.5).dtype(), float32);
  EXPECT_EQ(full({2}, 3).dtype(), int64);
  EXPECT_EQ(full({2}, true).dtype(), bool_);
  EXPECT_EQ(arange(5).dtype(), int64);
  EXPECT_EQ(arange(0, 1, 0.25).numel().expect_int(), 4);
  EXPECT_EQ(arange(10, 0, -3).numel().expect_int(), 4);
  EXPECT_EQ(arange(10, 0, -3)[3].item<int64_t>(), 1);
  EXPECT_EQ(ones({2, 2}, int8).sum().item<int64_t>(), 4);
  EXPECT_EQ(zeros_like(zeros({3}, float64)).dtype(), float64);
  EXPECT_EQ(full_like(zeros({3}), 2, int32).dtype(), int32);
  EXPECT_TRUE(empty({0, 3}).numel() == 0);
  EXPECT_THROW(zeros({-1}), ShapeError);
  EXPECT_THROW(arange(0, 5, 0), ValueError);
  EXPECT_THROW(arange(5, 0, 1), ValueError);
  Tensor m = empty({2, 3}, Device("meta"));
  EXPECT_TRUE(m.is_meta());
  EXPECT_FALSE(m.has_data());
}

TEST(Tensor, PhiloxKnownAnswers) {
  // Random123's known-answer vectors for philox4x32-10.
  auto r = philox::philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = philox::philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
}

TEST(Tensor, RandomIsSeededAndInRange) {
  manual_seed(1234);
  Tensor a = rand({10000});
  manual_seed(1234);
  Tensor b = rand({10000});
  EXPECT_TRUE(equal(a, b));
  Tensor c = rand({10000});
  EXPECT_FALSE(equal(b, c));  // the offset advanced
  EXPECT_GE(a.min().item<float>(), 0.0f);
  EXPECT_LT(a.max().item<float>(), 1.0f);
  EXPECT_NEAR(a.mean().item<double>(), 0.5, 0.02);
  Tensor n = randn({20000}, float64);
  EXPECT_NEAR(n.mean().item<double>(), 0.0, 0.03);
  EXPECT_NEAR(var(n).item<double>(), 1.0, 0.05);
  Tensor i = randint(-3, 4, {5000});
  EXPECT_EQ(i.dtype(), int64);
  EXPECT_EQ(i.min().item<int64_t>(), -3);
  EXPECT_EQ(i.max().item<int64_t>(), 3);
  Tensor h = rand({1000}, bfloat16);
  EXPECT_LT(h.max().item<float>(), 1.0f);
  EXPECT_THROW(rand({2}, int32), DTypeError);
  EXPECT_THROW(randint(3, 3, {2}), ValueError);
  // The stream is element-wise: the same seed and offset give the same value on every path.
  manual_seed(99);
  const uint64_t offset = reserve_random_offset(0);
  Tensor r = rand({4});
  const auto bits = philox::random4(99, offset + 2);
  EXPECT_EQ(r[2].item<float>(), philox::uniform_float(bits.v[0], 24));
}

// ---- printing: PyTorch's format -------------------------------------------------------------

TEST(TensorPrint, MatchesPyTorch) {
  EXPECT_EQ(str(fvec({1, 2, 3})), "tensor([1., 2., 3.])");
  EXPECT_EQ(str(arange(3)), "tensor([0, 1, 2])");
  EXPECT_EQ(str(from_vector(std::vector<bool>{true, false})), "tensor([ True, False])");
  EXPECT_EQ(str(fvec({0.1f, 2.5f})), "tensor([0.1000, 2.5000])");
  EXPECT_EQ(str(fvec({1e-5f, 1.0f})), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(str(fvec({1.0f, 10000.0f})), "tensor([1.0000e+00, 1.0000e+04])");
  EXPECT_EQ(str(fvec({1, 2}).to(float64)), "tensor([1., 2.], dtype=tessera.float64)");
  EXPECT_EQ(str(arange(1, 3).to(int32)), "tensor([1, 2], dtype=tessera.int32)");
  EXPECT_EQ(str(fvec({1, -2, 3, 4}).view({2, 2})), "tensor([[ 1., -2.],\n        [ 3.,  4.]])");
  EXPECT_EQ(str(zeros({0})), "tensor([])");
  EXPECT_EQ(str(zeros({0, 3})), "tensor([], size=(0, 3))");
  EXPECT_EQ(str(zeros({0}, int64)), "tensor([], dtype=tessera.int64)");
  EXPECT_EQ(str(full({}, 3.5)), "tensor(3.5000)");
  EXPECT_EQ(str(full({}, 5)), "tensor(5)");
  EXPECT_EQ(str(fvec({NAN, INFINITY, 1})), "tensor([nan, inf, 1.])");
  EXPECT_EQ(str(fvec({-0.5f, 0.25f})), "tensor([-0.5000,  0.2500])");
  EXPECT_EQ(str(arange(1000, 3000, 1, float32)),
            "tensor([1000., 1001., 1002.,  ..., 2997., 2998., 2999.])");
  // Above a ratio of 1000 between the extreme values, scientific notation (and line wrapping).
  EXPECT_EQ(str(arange(0, 2000, 1, float32)),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
            "        1.9990e+03])");
  EXPECT_EQ(str(arange(0, 20, 1, float32) / 3),
            "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n"
            "        3.0000, 3.3333, 3.6667, 4.0000, 4.3333, 4.6667, 5.0000, 5.3333, 5.6667,\n"
            "        6.0000, 6.3333])");
  EXPECT_EQ(str(empty({2, 3}, Device("meta"))), "tensor(..., device='meta', size=(2, 3))");
  EXPECT_EQ(str(fvec({1, 2}).to(bfloat16)), "tensor([1., 2.], dtype=tessera.bfloat16)");
  EXPECT_EQ(str(arange(0, 8, 1, float32).view({2, 2, 2})),
            "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])");
  EXPECT_EQ(str(zeros({2, 2}, int64)), "tensor([[0, 0],\n        [0, 0]])");
  // Non-contiguous tensors print their logical order.
  EXPECT_EQ(str(arange(0, 4, 1, float32).view({2, 2}).t()),
            "tensor([[0., 2.],\n        [1., 3.]])");
}

TEST(TensorPrint, SummarizesLargeMatrices) {
  const std::string s = str(arange(1000, 3500, 1, float32).view({50, 50}));
  EXPECT_NE(s.find("..."), std::string::npos);
  EXPECT_EQ(s.substr(0, 9), "tensor([[");
  std::istringstream lines(s);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) ++n;
  EXPECT_EQ(n, 7);  // 3 rows, "...", 3 rows
}
