#include "tl/variants.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace tessera::tl {

MetaArg MetaValue::as_meta(std::string_view name) const {
  MetaArg m{name, kind};
  m.i = i;
  m.f = f;
  m.dtype = dtype;
  return m;
}

std::string MetaValue::str() const {
  switch (kind) {
    case MetaArg::Kind::Int:
      return std::to_string(i);
    case MetaArg::Kind::Bool:
      return i ? "True" : "False";
    case MetaArg::Kind::Float: {
      std::ostringstream os;
      os << f;
      return os.str();
    }
    case MetaArg::Kind::DType:
      return dtype_name(dtype);
  }
  return "?";
}

bool MetaValue::operator==(const MetaValue& o) const {
  return kind == o.kind && i == o.i && (f == o.f || (std::isnan(f) && std::isnan(o.f))) &&
         dtype == o.dtype;
}

void with_variant(ArrayRef<KernelArg> args, const Variant& v, SourceLoc loc,
                  SmallVector<KernelArg, 16>& out) {
  out.clear();
  out.reserve(args.size() + v.meta.size() + 2);
  out.append(args.begin(), args.end());
  for (const auto& [n, m] : v.meta) out.emplace_back(m.as_meta(n), loc);
  if (v.has_options) {
    out.emplace_back(num_warps(v.num_warps), loc);
    out.emplace_back(num_stages(v.num_stages), loc);
    if (v.maxnreg) out.emplace_back(maxnreg(v.maxnreg), loc);
  }
}

const VariantSource* variant_source(const Launcher& launch) {
  return dynamic_cast<const VariantSource*>(launch.target());
}

PreparedVariants::PreparedVariants(const JITFunction& fn, std::vector<std::vector<KernelArg>> args,
                                   SourceLoc loc, bool tolerate_failures)
    : s_(fn.state()), loc_(loc), args_(std::move(args)) {
  const size_t n = args_.size();
  specs_.resize(n);
  kernels_.resize(n);
  errors_.resize(n);
  std::vector<size_t> bound;
  std::vector<detail::Spec> specs;
  for (size_t i = 0; i < n; ++i) {
    detail::Spec sp;
    try {
      detail::bind(s_, ArrayRef<KernelArg>(args_[i].data(), args_[i].size()), sp.bound, sp.opts,
                   loc);
    } catch (const Error& e) {
      if (!tolerate_failures) throw;
      errors_[i] = e.what();
      continue;
    }
    bound.push_back(i);
    specs.push_back(sp);
    specs_[i] = std::move(sp);
  }
  std::vector<std::string> errors;
  auto kernels = detail::lookup_or_prepare(s_, specs, loc, tolerate_failures ? &errors : nullptr);
  for (size_t j = 0; j < bound.size(); ++j) {
    kernels_[bound[j]] = kernels[j];
    if (!kernels[j]) errors_[bound[j]] = errors[j];
  }
}

const Tensor* PreparedVariants::param_tensor(size_t i, size_t param) const {
  const auto& b = specs_[i].bound;
  return param < b.size() ? b[param].tensor : nullptr;
}

void PreparedVariants::build(const std::vector<size_t>& which) {
  std::vector<detail::Spec> specs;
  std::vector<std::shared_ptr<detail::CompiledKernel>> kernels;
  std::vector<size_t> at;
  for (size_t i = 0; i < size(); ++i) {
    const bool wanted = which.empty() || std::find(which.begin(), which.end(), i) != which.end();
    if (!wanted || !kernels_[i]) continue;
    specs.push_back(specs_[i]);
    kernels.push_back(kernels_[i]);
    at.push_back(i);
  }
  detail::build_missing(s_, specs, kernels);
  for (size_t k = 0; k < at.size(); ++k) kernels_[at[k]] = kernels[k];
}

}  // namespace tessera::tl
