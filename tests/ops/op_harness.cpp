#include "op_harness.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "ops/pointwise.h"

namespace tessera::testing {

double round_to(DType t, double v) {
  if (std::isnan(v)) return v;
  switch (t) {
    case DType::Bool:
      return v != 0;
    case DType::Float32:
      return static_cast<float>(v);
    case DType::Float16:
      return static_cast<float>(Half(static_cast<float>(v)));
    case DType::BFloat16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    case DType::Float64:
      return v;
    default:
      break;
  }
  if (!is_integral(t)) return v;
  const int bits = static_cast<int>(itemsize(t)) * 8;
  const double lo = is_signed(t) ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double hi = is_signed(t) ? std::ldexp(1.0, bits - 1) : std::ldexp(1.0, bits);
  if (v >= lo && v < hi) return std::trunc(v);
  const double mod = std::ldexp(1.0, bits);
  double w = std::fmod(std::trunc(v), mod);
  if (w < 0) w += mod;
  if (is_signed(t) && w >= mod / 2) w -= mod;
  return w;
}

Ref reduce_ref(const Ref& x, std::vector<int64_t> dims, bool keepdim,
               const std::function<double(const std::vector<double>&)>& f) {
  const int64_t nd = static_cast<int64_t>(x.shape.size());
  if (dims.empty()) {
    for (int64_t d = 0; d < nd; ++d) dims.push_back(d);
  }
  for (auto& d : dims) d = d < 0 ? d + nd : d;
  std::vector<bool> red(static_cast<size_t>(nd), false);
  for (auto d : dims) red[static_cast<size_t>(d)] = true;
  Ref out;
  std::vector<int64_t> kept_shape;
  for (int64_t d = 0; d < nd; ++d) {
    if (red[d]) {
      if (keepdim) out.shape.push_back(1);
    } else {
      out.shape.push_back(x.shape[d]);
      kept_shape.push_back(x.shape[d]);
    }
  }
  int64_t nout = 1;
  for (auto s : kept_shape) nout *= s;
  std::vector<std::vector<double>> groups(static_cast<size_t>(nout));
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  for (int64_t k = 0; k < x.numel(); ++k) {
    int64_t rem = k;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % x.shape[d];
      rem /= x.shape[d];
    }
    int64_t o = 0;
    for (int64_t d = 0; d < nd; ++d) {
      if (!red[d]) o = o * x.shape[d] + idx[d];
    }
    groups[static_cast<size_t>(o)].push_back(x.data[static_cast<size_t>(k)]);
  }
  for (const auto& g : groups) out.data.push_back(f(g));
  return out;
}

Ref along_ref(const Ref& x, int64_t dim,
              const std::function<std::vector<double>(const std::vector<double>&)>& f) {
  const int64_t nd = static_cast<int64_t>(x.shape.size());
  Ref out = x;
  if (nd == 0) {
    out.data = f(x.data);
    return out;
  }
  if (dim < 0) dim += nd;
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < nd; ++d) inner *= x.shape[d];
  const int64_t n = x.shape[dim];
  const int64_t outer = n == 0 ? 0 : x.numel() / (n * inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<double> line(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j)
        line[j] = x.data[static_cast<size_t>((o * n + j) * inner + i)];
      const auto res = f(line);
      for (int64_t j = 0; j < n; ++j)
        out.data[static_cast<size_t>((o * n + j) * inner + i)] = res[j];
    }
  }
  return out;
}

namespace {

// TESSERA_TEST_THROUGH_TILES=1: CPU cases run through the tile lowering (the GPU's kernels, on
// the CPU backend; with TESSERA_CROSSCHECK=nvrtc each is also compiled for sm_90).
bool through_tiles_requested() {
  const char* v = std::getenv("TESSERA_TEST_THROUGH_TILES");
  return v && std::string(v) == "1";
}

std::string describe(const OpSpec& s, DType dt, Layout l, const std::vector<Shape>& shapes) {
  std::ostringstream os;
  os << "[" << s.name << "] on " << test_device() << " dtype=" << dtype_name(dt)
     << " layout=" << layout_name(l) << " shapes=";
  for (const auto& sh : shapes) {
    os << "[";
    for (size_t i = 0; i < sh.size(); ++i) os << (i ? "," : "") << sh[i];
    os << "]";
  }
  os << " seed=" << test_seed();
  return os.str();
}

}  // namespace

void run_spec(const OpSpec& s) {
  // On a GPU pass (TESSERA_TEST_DEVICE=cuda) the inputs move there with their layouts; results
  // must stay there and are read back for the comparison.
  const Device device = test_device();
  for (DType dt : s.dtypes) {
    for (const auto& shapes : s.shapes) {
      const auto in_dtypes = [&] {
        std::vector<DType> v;
        for (size_t i = 0; i < shapes.size(); ++i)
          v.push_back(s.input_dtypes ? s.input_dtypes(dt, i) : dt);
        return v;
      }();
      const DType out_dt = s.out_dtype ? s.out_dtype(dt) : dt;
      Tol tol = default_tol(out_dt);
      tol.atol *= s.tol_scale;
      tol.rtol *= s.tol_scale;
      Tensor reference_result;
      for (Layout layout : kAllLayouts) {
        if (!s.layouts && layout != Layout::Contiguous) continue;
        const std::string what = describe(s, dt, layout, shapes);
        std::vector<Tensor> inputs;
        std::vector<Ref> refs;
        for (size_t i = 0; i < shapes.size(); ++i) {
          const Domain dom = i < s.domains.size() ? s.domains[i] : Domain::Any;
          const Tensor host = random_tensor(shapes[i], in_dtypes[i], dom, layout);
          refs.push_back(to_ref(host));
          inputs.push_back(same_layout_on(host, device));
          EXPECT_TRUE(inputs.back().strides().equals(host.strides())) << what;
        }
        Ref want = s.ref(refs, dt);
        if (is_integral(out_dt) || out_dt == DType::Bool) {
          for (auto& v : want.data) v = round_to(out_dt, v);
        }
        Tensor got;
        try {
          std::optional<ops_detail::ScopedThroughTiles> tiles;
          if (through_tiles_requested()) tiles.emplace();
          got = s.run(inputs);
        } catch (const std::exception& e) {
          ADD_FAILURE() << what << ": threw " << e.what();
          continue;
        }
        EXPECT_EQ(got.dtype(), out_dt) << what;
        EXPECT_EQ(got.device(), device) << what;
        EXPECT_TRUE(close_to(got.cpu(), want, tol)) << what;
        if (layout == Layout::Contiguous) reference_result = got;

        if (s.run_out) {
          Tensor out = empty(got.sizes(), TensorOptions().dtype(got.dtype()).device(device));
          poison(out);
          try {
            std::optional<ops_detail::ScopedThroughTiles> tiles;
            if (through_tiles_requested()) tiles.emplace();
            s.run_out(out, inputs);
            EXPECT_TRUE(close_to(out.cpu(), want, tol)) << what << " (out= variant)";
          } catch (const std::exception& e) {
            ADD_FAILURE() << what << " (out= variant): threw " << e.what();
          }
        }
      }
      if (s.meta && reference_result.defined()) {
        std::vector<Tensor> metas;
        for (size_t i = 0; i < shapes.size(); ++i) {
          std::vector<SymInt> sh(shapes[i].begin(), shapes[i].end());
          metas.push_back(empty(sh, TensorOptions().dtype(in_dtypes[i]).device(kMeta)));
        }
        const std::string what = describe(s, dt, Layout::Contiguous, shapes) + " (meta)";
        try {
          Tensor m = s.run(metas);
          EXPECT_TRUE(m.is_meta()) << what;
          EXPECT_EQ(m.dtype(), reference_result.dtype()) << what;
          EXPECT_TRUE(m.sizes().equals(reference_result.sizes()))
              << what << ": meta sizes " << m.sizes() << " vs " << reference_result.sizes();
          EXPECT_TRUE(m.strides().equals(reference_result.strides()))
              << what << ": meta strides " << m.strides() << " vs " << reference_result.strides();
        } catch (const std::exception& e) {
          ADD_FAILURE() << what << ": threw " << e.what();
        }
      }
    }
  }
}

}  // namespace tessera::testing
