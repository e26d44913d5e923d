// Built-in operators on CUDA tensors (issue 14): the pointwise ops run as tile kernels generated
// from the same functors as the CPU loops (src/tl/op_tiles.cpp) and agree with the CPU on
// the same inputs: bit for bit for arithmetic, within the math contract for transcendental ops.
// Without a GPU each case skips itself; tests/tl/test_op_tiles.cpp checks the same
// lowering on CPU tensors everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "gpu_testing.h"
#include "tessera/tessera.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// f on GPU copies of `in` against f on the CPU tensors.
void agree(const char* what, const std::vector<Tensor>& in,
           const std::function<Tensor(const std::vector<Tensor>&)>& f, double rtol = 0,
           double atol = -1) {
  if (atol < 0) atol = rtol;
  std::vector<Tensor> gin;
  for (const auto& t : in) gin.push_back(t.to(kGpu));
  const Tensor want = f(in);
  const Tensor got = f(gin);
  ASSERT_TRUE(got.device().is_cuda()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  if (rtol == 0) {
    EXPECT_TRUE(all_close(got.cpu().to(DType::Float64), want.to(DType::Float64), 0, 0, true))
        << what;
  } else {
    EXPECT_TRUE(all_close(got.cpu().to(DType::Float64), want.to(DType::Float64), rtol, atol, true))
        << what;
  }
}

TEST(CudaOps, ArithmeticAgreesWithTheCpuBitForBit) {
  REQUIRE_GPU();
  using V = const std::vector<Tensor>&;
  for (DType d : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    const std::vector<Tensor> in = {random_tensor({37, 129}, d),
                                    random_tensor({37, 129}, d, Domain::NonZero)};
    agree("add", in, [](V x) { return x[0] + x[1]; });
    agree("add alpha", in, [](V x) { return add(x[0], x[1], 0.5); });
    agree("sub", in, [](V x) { return x[0] - x[1]; });
    agree("mul scalar", in, [](V x) { return x[0] * 3.25; });
    agree("div", in, [](V x) { return x[0] / x[1]; });
    agree("div floor", in, [](V x) { return div(x[0], x[1], "floor"); });
    agree("remainder", in, [](V x) { return remainder(x[0], x[1]); });
    agree("maximum", in, [](V x) { return maximum(x[0], x[1]); });
    agree("lt", in, [](V x) { return lt(x[0], x[1]); });
    agree("relu", in, [](V x) { return relu(x[0]); });
    agree("clamp", in, [](V x) { return clamp(x[0], -0.5, 0.5); });
    agree("sqrt", in, [](V x) { return sqrt(abs(x[0])); });
  }
  for (DType d : {DType::Int32, DType::Int64, DType::Int8, DType::UInt8}) {
    const std::vector<Tensor> in = {random_tensor({1000}, d),
                                    random_tensor({1000}, d, Domain::NonZero)};
    agree("int add", in, [](V x) { return add(x[0], x[1], 3); });
    agree("int mul", in, [](V x) { return x[0] * x[1]; });
    agree("int div trunc", in, [](V x) { return div(x[0], x[1], "trunc"); });
    agree("int shifts", in,
          [](V x) { return bitwise_left_shift(x[0], x[1]) ^ bitwise_right_shift(x[0], x[1]); });
    agree("int pow", {random_tensor({1000}, d), random_tensor({1000}, d, Domain::Small)},
          [](V x) { return pow(x[0], x[1]); });
  }
}

TEST(CudaOps, MathWithinItsContract) {
  REQUIRE_GPU();
  using V = const std::vector<Tensor>&;
  const std::vector<Tensor> in = {random_tensor({4096}, DType::Float32)};
  agree(
      "exp", in, [](V x) { return exp(x[0]); }, 2e-6);
  agree(
      "sigmoid", in, [](V x) { return sigmoid(x[0]); }, 2e-6);
  agree(
      "tanh", in, [](V x) { return tanh(x[0]); }, 2e-6);
  agree(
      "gelu", in, [](V x) { return gelu(x[0]); }, 2e-6);
  agree(
      "silu", in, [](V x) { return silu(x[0]); }, 2e-6);
  agree(
      "cos", in, [](V x) { return cos(x[0]); }, 2e-6);
}

TEST(CudaOps, Broadcasts) {
  REQUIRE_GPU();
  Tensor a = random_tensor({8, 1, 33}, DType::Float32), b = random_tensor({5, 1}, DType::Float32);
  const Tensor want = a + b;
  const Tensor got = a.to(kGpu) + b.to(kGpu);
  EXPECT_TRUE(bitwise_equal(got.cpu(), want));
}

TEST(CudaOps, TransposedSlicedViews) {
  REQUIRE_GPU();
  Tensor m = random_tensor({40, 30}, DType::Float32);
  const Tensor v = m.t().slice(0, 2, 28, 3);
  EXPECT_TRUE(bitwise_equal((m.to(kGpu).t().slice(0, 2, 28, 3) * 2).cpu(), v * 2));
}

TEST(CudaOps, InPlaceAndOutWithACast) {
  REQUIRE_GPU();
  Tensor a = random_tensor({8, 1, 33}, DType::Float32), b = random_tensor({5, 1}, DType::Float32);
  Tensor x = random_tensor({1000}, DType::Float32);
  Tensor gx = x.to(kGpu);
  gx.add_(x.to(kGpu), 2);
  x.add_(x.clone(), 2);
  EXPECT_TRUE(bitwise_equal(gx.cpu(), x));
  Tensor out = empty({8, 5, 33}, TensorOptions().dtype(DType::Float64).device(kGpu));
  add_out(out, a.to(kGpu), b.to(kGpu));
  EXPECT_TRUE(bitwise_equal(out.cpu(), (a + b).to(DType::Float64)));
}

TEST(CudaOps, CpuScalarsJoinAndOtherMixedDevicesAreAnError) {
  REQUIRE_GPU();
  Tensor a = random_tensor({8, 1, 33}, DType::Float32);
  // A 0-dim CPU tensor joins a GPU op (PyTorch's rule for scalars).
  const Tensor s = full({}, 1.5);
  EXPECT_TRUE(bitwise_equal((a.to(kGpu) * s).cpu(), a * s));
  // Mixed devices otherwise: a DeviceError naming the op.
  const std::string err = error_of([&] { (void)(a.to(kGpu) + a); });
  EXPECT_NE(err.find("[add]"), std::string::npos) << err;
  EXPECT_NE(err.find("cuda:0"), std::string::npos) << err;
}

TEST(CudaOps, WhereAgreesWithTheCpu) {
  REQUIRE_GPU();
  using V = const std::vector<Tensor>&;
  const std::vector<Tensor> in = {random_tensor({7, 1, 40}, DType::Bool),
                                  random_tensor({7, 3, 40}, DType::Float32),
                                  random_tensor({3, 1}, DType::Float32)};
  agree("where", in, [](V x) { return where(x[0], x[1], x[2]); });
  agree("where scalar", in, [](V x) { return where(x[0], x[1], -1.0); });
}

TEST(CudaOps, ReductionsAgreeWithTheCpu) {
  REQUIRE_GPU();
  using V = const std::vector<Tensor>&;
  for (DType d : {DType::Float32, DType::BFloat16, DType::Float64}) {
    const std::vector<Tensor> in = {random_tensor({33, 70, 5}, d)};
    const double tol = d == DType::Float64 ? 1e-12 : d == DType::Float32 ? 2e-5 : 1e-2;
    agree(
        "sum", in, [](V x) { return x[0].sum(); }, tol);
    agree(
        "sum dim", in, [](V x) { return x[0].sum({1}); }, tol);
    agree(
        "mean keepdim", in,
        [](V x) {
          return x[0].mean({0, 2}, true);
        },
        tol);
    agree("amax", in, [](V x) { return x[0].amax({1}); });
    agree("min", in, [](V x) { return x[0].min(); });
    agree(
        "var", in, [](V x) { return var(x[0], {1}); }, tol);
  }
  for (DType d : {DType::Int32, DType::Int8, DType::Bool}) {
    const std::vector<Tensor> in = {random_tensor({33, 700}, d)};
    agree("int sum", in, [](V x) { return x[0].sum({1}); });
    agree("int amin", in, [](V x) { return x[0].amin({0}); });
  }
  Tensor x = random_tensor({4, 3000}, DType::Float32);
  x[2][2900].fill_(std::nan(""));
  agree("NaN wins amax", {x}, [](V t) { return t[0].amax({1}); });
  agree(
      "strided view sum", {random_tensor({64, 48}, DType::Float32)},
      [](V t) { return t[0].t().slice(0, 1, 40, 3).sum({1}); }, 2e-5);
}

TEST(CudaOps, MaxWithIndicesAndArgmax) {
  REQUIRE_GPU();
  using V = const std::vector<Tensor>&;
  const std::vector<Tensor> in = {random_tensor({9, 2000}, DType::Float32, Domain::Small)};
  agree("max values", in, [](V x) { return std::get<0>(max(x[0], 1)); });
  agree("max indices", in, [](V x) { return std::get<1>(max(x[0], 1)); });
  agree("argmin columns", in, [](V x) { return argmin(x[0], 0); });
  agree("argmax flat", in, [](V x) { return argmax(x[0]); });
}

// cuBLAS reads transposed (column-major) operands, broadcast weights and strided vectors where
// they lie: small integers in floats make every product exact, so a wrong transpose flag, leading
// dimension or batch stride shows as a wrong value.
TEST(CudaOps, MatmulReadsTransposedAndBroadcastOperandsInPlace) {
  REQUIRE_GPU();
  const auto ints = [](std::vector<int64_t> shape, DType d) {
    return random_tensor(shape, DType::Int32).to(d);
  };
  using V = const std::vector<Tensor>&;
  for (DType d : {DType::Float32, DType::BFloat16}) {
    const char* dt = dtype_name(d);
    const std::string tag = std::string(" ") + dt;
    agree(("a.t() @ b" + tag).c_str(), {ints({70, 33}, d), ints({70, 45}, d)},
          [](V in) { return matmul(in[0].t(), in[1]); });
    agree(("a @ w.t()" + tag).c_str(), {ints({33, 70}, d), ints({45, 70}, d)},
          [](V in) { return matmul(in[0], in[1].t()); });
    agree(("a.t() @ b.t()" + tag).c_str(), {ints({70, 33}, d), ints({45, 70}, d)},
          [](V in) { return matmul(in[0].t(), in[1].t()); });
    agree(("q @ k^T batched" + tag).c_str(), {ints({2, 3, 17, 8}, d), ints({2, 3, 19, 8}, d)},
          [](V in) { return matmul(in[0], in[1].transpose(-1, -2)); });
    agree(("batched @ broadcast weight" + tag).c_str(), {ints({4, 17, 8}, d), ints({8, 9}, d)},
          [](V in) { return matmul(in[0], in[1]); });
    agree(("batched @ broadcast transposed weight" + tag).c_str(),
          {ints({4, 17, 8}, d), ints({9, 8}, d)}, [](V in) { return matmul(in[0], in[1].t()); });
    agree(("sliced rows and a strided vector" + tag).c_str(), {ints({40, 30}, d), ints({60}, d)},
          [](V in) { return matmul(in[0].slice(1, 2, 17), in[1].slice(0, 0, 30, 2)); });
    agree(("a column-strided matrix (copied)" + tag).c_str(), {ints({12, 40}, d), ints({20, 6}, d)},
          [](V in) { return matmul(in[0].slice(1, 0, 40, 2), in[1]); });
  }
}

TEST(CudaOps, LayerNormAndRmsNorm) {
  REQUIRE_GPU();
  using V = const std::vector<Tensor>&;
  const std::vector<Tensor> in = {random_tensor({64, 4096}, DType::Float32),
                                  random_tensor({4096}, DType::Float32),
                                  random_tensor({4096}, DType::Float32)};
  agree(
      "layer_norm", in, [](V x) { return layer_norm(x[0], {4096}, x[1], x[2]); }, 2e-5);
  agree(
      "rms_norm", in, [](V x) { return rms_norm(x[0], {4096}, x[1]); }, 2e-5);
}

TEST(CudaOps, SoftmaxAgreesWithTheCpu) {
  REQUIRE_GPU();
  using V = const std::vector<Tensor>&;
  const std::vector<Tensor> in = {random_tensor({64, 3000}, DType::Float32)};
  agree(
      "softmax rows", in, [](V x) { return softmax(x[0], -1); }, 2e-5);
  agree(
      "log_softmax columns", in, [](V x) { return log_softmax(x[0], 0); }, 2e-5);
  agree(
      "softmax bf16", {random_tensor({16, 700}, DType::BFloat16)},
      [](V x) { return softmax(x[0], 1); }, 1.6e-2);
  agree("cumsum int", {random_tensor({8, 3000}, DType::Int32)},
        [](V x) { return cumsum(x[0], 1); });
  // float32 running sums of 3000 values in [-3, 3] (the CPU's in double): near zero crossings
  // the error is absolute, about sqrt(n) * eps * |sum| (1.2e-4 seen), so atol 2e-3.
  agree(
      "cumsum float", in, [](V x) { return cumsum(x[0], 1); }, 1e-4, 2e-3);
}

TEST(CudaOps, CatAndStack) {
  REQUIRE_GPU();
  using V = const std::vector<Tensor>&;
  const std::vector<Tensor> in = {random_tensor({3, 40}, DType::Float32),
                                  random_tensor({5, 40}, DType::Float32)};
  agree("cat rows", in, [](V x) { return cat({x[0], x[1]}, 0); });
  agree("cat columns of transposes", in, [](V x) { return cat({x[0].t(), x[1].t()}, 1); });
  agree("stack", {in[0], in[0]}, [](V x) { return stack({x[0], x[1]}, 1); });
}

// The seed's backward uses built-in ops on the inputs' device: autograd on GPU tensors.
TEST(CudaOps, AutogradThroughPointwiseOps) {
  REQUIRE_GPU();
  Tensor x = random_tensor({64}, DType::Float32);
  Tensor gx = x.to(kGpu).detach().requires_grad_();
  Tensor cx = x.clone().requires_grad_();
  (sigmoid(gx) * gx).backward(ones({64}, TensorOptions().device(kGpu)));
  (sigmoid(cx) * cx).backward(ones({64}));
  ASSERT_TRUE(gx.grad().defined());
  EXPECT_TRUE(all_close(gx.grad().cpu(), cx.grad(), 2e-6, 2e-6));
}

}  // namespace
