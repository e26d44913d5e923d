// Triton's tutorial 09 (persistent matmul), ported: the plain tiled kernel beside the persistent
// one, which launches one program per multiprocessor (per pool thread on the CPU) and walks the
// output tiles with a runtime `tl::range(start_pid, num_tiles, NUM_SMS, {.flatten = true})`,
// grouped order from a helper as the tutorial's `_compute_pid`, offsets clamped with tl::where
// and hinted, a K loop accumulating in float32 with `tl::dot`, and a second tile counter
// (`tile_id_c`, a tl::Var) for the epilogue. Both against float64 on fresh fp16 inputs, at sizes
// that are and are not multiples of the blocks. Runs on the GPU with `--cuda`.
//
// Not ported: the TMA and device-side tensor-descriptor variants (tessera's descriptors exist and
// run everywhere, but lowering them to TMA is the tensor-core issue's work).
#include <cstring>
#include <iostream>
#include <utility>

#include <tessera/tessera.h>
#include <tessera/tl.h>

namespace tl = tessera::tl;
using tessera::Tensor;

// The tile's (pid_m, pid_n) in grouped order.
std::pair<tl::Tile, tl::Tile> compute_pid(const tl::Tile& tile_id, const tl::Tile& num_pid_in_group,
                                          const tl::Tile& num_pid_m, int64_t GROUP_SIZE_M) {
  auto group_id = tile_id / num_pid_in_group;
  auto first_pid_m = group_id * GROUP_SIZE_M;
  auto group_size_m = tl::minimum(num_pid_m - first_pid_m, GROUP_SIZE_M);
  auto pid_m = first_pid_m + (tile_id % group_size_m);
  auto pid_n = (tile_id % num_pid_in_group) / group_size_m;
  return {pid_m, pid_n};
}

TL_JIT(matmul_kernel, tl::Ptr a_ptr, tl::Ptr b_ptr, tl::Ptr c_ptr, tl::Int M, tl::Int N, tl::Int K,
       tl::Int stride_am, tl::Int stride_ak, tl::Int stride_bk, tl::Int stride_bn,
       tl::Int stride_cm, tl::Int stride_cn, tl::Const BLOCK_SIZE_M, tl::Const BLOCK_SIZE_N,
       tl::Const BLOCK_SIZE_K, tl::Const GROUP_SIZE_M) {
  auto pid = tl::program_id(0);
  auto num_pid_m = tl::cdiv(M, BLOCK_SIZE_M);
  auto num_pid_n = tl::cdiv(N, BLOCK_SIZE_N);
  auto [pid_m, pid_n] =
      compute_pid(pid, GROUP_SIZE_M * num_pid_n, num_pid_m, GROUP_SIZE_M.int_value());
  auto start_m = pid_m * BLOCK_SIZE_M;
  auto start_n = pid_n * BLOCK_SIZE_N;
  auto offs_am = start_m + tl::arange(0, BLOCK_SIZE_M);
  auto offs_bn = start_n + tl::arange(0, BLOCK_SIZE_N);
  offs_am = tl::where(offs_am < M, offs_am, 0);
  offs_bn = tl::where(offs_bn < N, offs_bn, 0);
  offs_am = tl::max_contiguous(tl::multiple_of(offs_am, BLOCK_SIZE_M), BLOCK_SIZE_M);
  offs_bn = tl::max_contiguous(tl::multiple_of(offs_bn, BLOCK_SIZE_N), BLOCK_SIZE_N);
  auto offs_k = tl::arange(0, BLOCK_SIZE_K);
  tl::Var a_ptrs =
      a_ptr + (offs_am[{tl::_, tl::None}] * stride_am + offs_k[{tl::None, tl::_}] * stride_ak);
  tl::Var b_ptrs =
      b_ptr + (offs_k[{tl::_, tl::None}] * stride_bk + offs_bn[{tl::None, tl::_}] * stride_bn);
  tl::Var accumulator = tl::zeros({BLOCK_SIZE_M, BLOCK_SIZE_N}, tl::float32);
  tl::range(0, tl::cdiv(K, BLOCK_SIZE_K), [&](tl::Tile k) {
    auto a = tl::load(a_ptrs, offs_k[{tl::None, tl::_}] < K - k * BLOCK_SIZE_K, 0.0f);
    auto b = tl::load(b_ptrs, offs_k[{tl::_, tl::None}] < K - k * BLOCK_SIZE_K, 0.0f);
    accumulator = tl::dot(a, b, accumulator);
    a_ptrs += BLOCK_SIZE_K * stride_ak;
    b_ptrs += BLOCK_SIZE_K * stride_bk;
  });
  auto c = accumulator.to(tl::float16);
  auto offs_cm = pid_m * BLOCK_SIZE_M + tl::arange(0, BLOCK_SIZE_M);
  auto offs_cn = pid_n * BLOCK_SIZE_N + tl::arange(0, BLOCK_SIZE_N);
  auto c_ptrs =
      c_ptr + stride_cm * offs_cm[{tl::_, tl::None}] + stride_cn * offs_cn[{tl::None, tl::_}];
  auto c_mask = (offs_cm[{tl::_, tl::None}] < M) & (offs_cn[{tl::None, tl::_}] < N);
  tl::store(c_ptrs, c, c_mask);
}

TL_JIT(matmul_kernel_persistent, tl::Ptr a_ptr, tl::Ptr b_ptr, tl::Ptr c_ptr, tl::Int M, tl::Int N,
       tl::Int K, tl::Int stride_am, tl::Int stride_ak, tl::Int stride_bk, tl::Int stride_bn,
       tl::Int stride_cm, tl::Int stride_cn, tl::Const BLOCK_SIZE_M, tl::Const BLOCK_SIZE_N,
       tl::Const BLOCK_SIZE_K, tl::Const GROUP_SIZE_M, tl::Const NUM_SMS) {
  auto start_pid = tl::program_id(0);
  auto num_pid_m = tl::cdiv(M, BLOCK_SIZE_M);
  auto num_pid_n = tl::cdiv(N, BLOCK_SIZE_N);
  auto k_tiles = tl::cdiv(K, BLOCK_SIZE_K);
  auto num_tiles = num_pid_m * num_pid_n;
  // The epilogue's own tile counter (the tutorial keeps it apart from the loop's for pipelining).
  tl::Var tile_id_c = start_pid - NUM_SMS;
  auto offs_k_for_mask = tl::arange(0, BLOCK_SIZE_K);
  auto num_pid_in_group = GROUP_SIZE_M * num_pid_n;
  tl::RangeOptions flatten;
  flatten.flatten = true;
  tl::range(
      start_pid, num_tiles, NUM_SMS,
      [&](tl::Tile tile_id) {
        auto [pid_m, pid_n] =
            compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M.int_value());
        auto start_m = pid_m * BLOCK_SIZE_M;
        auto start_n = pid_n * BLOCK_SIZE_N;
        auto offs_am = start_m + tl::arange(0, BLOCK_SIZE_M);
        auto offs_bn = start_n + tl::arange(0, BLOCK_SIZE_N);
        offs_am = tl::where(offs_am < M, offs_am, 0);
        offs_bn = tl::where(offs_bn < N, offs_bn, 0);
        offs_am = tl::max_contiguous(tl::multiple_of(offs_am, BLOCK_SIZE_M), BLOCK_SIZE_M);
        offs_bn = tl::max_contiguous(tl::multiple_of(offs_bn, BLOCK_SIZE_N), BLOCK_SIZE_N);
        tl::Var accumulator = tl::zeros({BLOCK_SIZE_M, BLOCK_SIZE_N}, tl::float32);
        tl::range(0, k_tiles, [&](tl::Tile ki) {
          auto offs_k = ki * BLOCK_SIZE_K + tl::arange(0, BLOCK_SIZE_K);
          auto a_ptrs = a_ptr + (offs_am[{tl::_, tl::None}] * stride_am +
                                 offs_k[{tl::None, tl::_}] * stride_ak);
          auto b_ptrs = b_ptr + (offs_k[{tl::_, tl::None}] * stride_bk +
                                 offs_bn[{tl::None, tl::_}] * stride_bn);
          auto a =
              tl::load(a_ptrs, offs_k_for_mask[{tl::None, tl::_}] < K - ki * BLOCK_SIZE_K, 0.0f);
          auto b =
              tl::load(b_ptrs, offs_k_for_mask[{tl::_, tl::None}] < K - ki * BLOCK_SIZE_K, 0.0f);
          accumulator = tl::dot(a, b, accumulator);
        });
        tile_id_c += NUM_SMS;
        auto [cpid_m, cpid_n] =
            compute_pid(tile_id_c, num_pid_in_group, num_pid_m, GROUP_SIZE_M.int_value());
        auto offs_cm = cpid_m * BLOCK_SIZE_M + tl::arange(0, BLOCK_SIZE_M);
        auto offs_cn = cpid_n * BLOCK_SIZE_N + tl::arange(0, BLOCK_SIZE_N);
        auto c_ptrs =
            c_ptr + stride_cm * offs_cm[{tl::_, tl::None}] + stride_cn * offs_cn[{tl::None, tl::_}];
        auto c_mask = (offs_cm[{tl::_, tl::None}] < M) & (offs_cn[{tl::None, tl::_}] < N);
        tl::store(c_ptrs, accumulator.to(tl::float16), c_mask);
      },
      flatten);
}

namespace {

struct Blocks {
  int64_t m = 64, n = 64, k = 32, group = 8;
};

Tensor matmul(const Tensor& a, const Tensor& b, bool persistent) {
  const int64_t M = a.size(0).guard_int(), K = a.size(1).guard_int(), N = b.size(1).guard_int();
  Tensor c =
      tessera::empty({M, N}, tessera::TensorOptions().dtype(tessera::float16).device(a.device()));
  const Blocks bl;
  const int64_t tiles = tl::cdiv(M, bl.m) * tl::cdiv(N, bl.n);
  auto common = [&](const tl::JITFunction& k, int64_t grid, auto... extra) {
    k[{grid}](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
              c.stride(1), tl::meta("BLOCK_SIZE_M", bl.m), tl::meta("BLOCK_SIZE_N", bl.n),
              tl::meta("BLOCK_SIZE_K", bl.k), tl::meta("GROUP_SIZE_M", bl.group), extra...);
  };
  if (!persistent) {
    common(matmul_kernel, tiles);
  } else {
    // One program per multiprocessor (pool thread), never more than there are tiles.
    const int64_t num_sms = tessera::get_device_properties(a.device()).multi_processor_count;
    common(matmul_kernel_persistent, std::min(num_sms, tiles), tl::meta("NUM_SMS", num_sms));
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const bool cuda = argc > 1 && std::strcmp(argv[1], "--cuda") == 0;
  const tessera::Device dev = cuda ? tessera::Device("cuda") : tessera::kCPU;
  std::cout << "device: " << tessera::get_device_properties(dev).name << ", "
            << tessera::get_device_properties(dev).multi_processor_count
            << (cuda ? " multiprocessors" : " pool threads") << "\n";
  bool ok = true;
  struct Size {
    int64_t m, n, k;
  };
  for (const Size s : {Size{256, 192, 128}, Size{300, 170, 90}, Size{33, 65, 17}}) {
    Tensor a = tessera::randn({s.m, s.k}).to(tessera::float16);
    Tensor b = tessera::randn({s.k, s.n}).to(tessera::float16);
    const Tensor ref = tessera::matmul(a.to(tessera::float64), b.to(tessera::float64));
    for (bool persistent : {false, true}) {
      Tensor c = matmul(a.to(dev), b.to(dev), persistent).cpu();
      // fp16 output: relative error about 2^-11 of each value.
      const bool good = tessera::allclose(c.to(tessera::float64), ref, 2e-3, 2e-3);
      std::cout << (persistent ? "persistent matmul " : "matmul ") << s.m << "x" << s.n << "x"
                << s.k << " on " << dev.str() << ": " << (good ? "matches" : "MISMATCH") << "\n";
      ok = ok && good;
    }
  }
  std::cout << (ok ? "tutorial_09_persistent_matmul: OK"
                   : "tutorial_09_persistent_matmul: MISMATCH")
            << "\n";
  return ok ? 0 : 1;
}
