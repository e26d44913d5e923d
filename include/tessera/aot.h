/** \file
 * Ahead-of-time packages (DESIGN.md D8, docs/aot.md): compile a function once into one file, load
 * it later and run it with no code generator and no compiler.
 *
 *   aot::compile("add_fn.tspkg", add_fn, {.dynamic_shapes = {{0, 0, aot::Dim("n", 16, 1 << 24)},
 *                                                           {1, 0, aot::Dim("n")}}}, x, y);
 *   aot::Package p = aot::load("add_fn.tspkg");
 *   Tensor out = p(x, y)[0];
 *
 * A package holds a manifest (format version, the signature and its guards as a serialized size
 * program, the CPU features its code needs), the compiled graph's schedule (operators by name with
 * their schema's hash, kernel launches with symbolic grids), its kernels (for each launch the
 * specialization the example took and, where it assumed an alignment or divisibility a later call
 * may break, a generic one) as one shared object for the CPU or, when the example's tensors are
 * on a GPU, cubins per CUDA architecture, and the tensors the function closed over.
 * Loading treats the file as untrusted: every offset, count and string is checked, each section's
 * SHA-256 too, and no path inside it reaches the file system. Every call checks the inputs
 * against the guards (dtype, device, rank, sizes against the `Dim` ranges, strides) and throws a
 * typed error naming the argument and the constraint.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/compile.h"
#include "tessera/dtype.h"
#include "tessera/error.h"

namespace tessera::aot {

/** A package that cannot be read: truncated, damaged, from an unknown format version, or for
 * another CPU; the message says which check failed. */
class PackageError : public Error {
 public:
  using Error::Error;
  const char* kind() const override { return "PackageError"; }
};

/** A dynamic dimension with its name and inclusive range (sizes 0 and 1 are always
 * specialized, so `min` is at least 2). The same name on two dimensions makes them equal. */
struct Dim {
  Dim(std::string name, int64_t min = 2, int64_t max = int64_t{1} << 40)
      : name(std::move(name)), min(min), max(max) {}
  std::string name;
  int64_t min, max;
};

/** Dimension `dim` of tensor argument `arg` (counting tensor arguments in order) is `d`. */
struct DynamicDim {
  int arg = 0;
  int dim = 0;
  Dim d;
};

struct ExportOptions {
  /** The dimensions that may change; every other size is fixed to the example's. */
  std::vector<DynamicDim> dynamic_shapes;
  /** A name for messages and `tessera aot inspect` (default: the function's location). */
  std::string name;
  /** The x86-64 level the CPU code is compiled for ("x86-64-v2", "-v3", "-v4"); empty: the
   * highest this CPU has. A machine without the level's features refuses the package at load. */
  std::string isa;
  /** A CUDA package (tensor arguments on a GPU): the architectures to ship cubins for ("sm_80",
   * "sm_90", "sm_90a", or "compute_80" for PTX); empty: the example's GPU's. A device runs the
   * cubin of its major version with the highest minor not above its own, else the newest PTX not
   * above its version (compiled by the driver at load). */
  std::vector<std::string> cuda_archs;
  SourceLoc loc = SourceLoc::current();
};

struct LoadOptions {
  /** When not empty: the file's SHA-256 (hex) must equal it. */
  std::string expected_sha256;
  /** A CUDA package: the GPU it runs on (-1: device 0); its cubins are loaded there. */
  int device = -1;
  /** A CPU package's constants (the tensors the function closed over) are the file's own pages,
   * mapped copy-on-write: loading copies nothing, and a write to one stays in this process. Such
   * a file must be replaced by writing a new one and renaming it (as aot::compile does), never
   * rewritten in place while loaded. `copy_constants` copies them into new memory instead. */
  bool copy_constants = false;
};

/** A package's argument, as data. */
struct PackageArg {
  bool tensor = false;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;     ///< the example's sizes
  std::vector<std::string> dims;  ///< per dimension: its Dim's name, or "" when static
};

/** What a package says about itself (`tessera aot inspect`). */
struct PackageInfo {
  std::vector<PackageArg> args;
  std::vector<Dim> dims;  ///< the dynamic dimensions and their ranges
  std::string name, created_by, isa;
  std::string device;                   ///< "cpu" or "cuda"
  std::vector<std::string> cuda_archs;  ///< a CUDA package's architectures ("sm_90")
  uint32_t format_major = 0, format_minor = 0;
  std::vector<std::string> cpu_features;  ///< what its kernels need
  std::vector<std::string> inputs;        ///< "arg0: float32[n] (n in [16, 16777216])"
  std::vector<std::string> guards;
  std::vector<std::string> nodes;  ///< "op aten::add", "kernel add_kernel (2 variants)"
  std::vector<std::pair<std::string, uint64_t>> sections;  ///< name, bytes
  std::string sha256;                                      ///< of the whole file
};

class LoadedPackage;

/** A loaded package: call it with the function's arguments (flattened leaves). */
class Package {
 public:
  explicit Package(std::shared_ptr<const LoadedPackage> p) : p_(std::move(p)) {}
  /** Runs the schedule on `args` after checking them; the function's results (flattened). */
  std::vector<IValue> run(const std::vector<IValue>& args) const;
  template <class... A>
  std::vector<IValue> operator()(const A&... args) const {
    std::vector<IValue> leaves;
    (compile_detail::Tree<A>::flatten(args, leaves), ...);
    return run(leaves);
  }
  const PackageInfo& info() const;
  /** Per kernel launch of the schedule, in order: its name and how many times each of its
   * variants ran (the example's specialization first, the generic one last). */
  std::vector<std::pair<std::string, std::vector<uint64_t>>> variant_runs() const;

 private:
  std::shared_ptr<const LoadedPackage> p_;
};

/** Reads, checks and loads a package. */
Package load(const std::string& path, const LoadOptions& options = {});
/** Reads and checks a package without loading its code (`tessera aot inspect|verify`). */
PackageInfo inspect(const std::string& path, const LoadOptions& options = {});

namespace detail {
void export_package(const std::string& path, const compile_detail::Traced& fn,
                    const std::vector<IValue>& example, const ExportOptions& options);
}

/** Traces `fn` on `example` arguments, compiles it and writes the package to `path`. A
 * CompileError names what cannot be ahead of time (an operator without a kernel for the device,
 * a constant a package cannot hold, a declared dynamic dimension that the function specializes,
 * citing the guard and its line); nothing is written then. */
template <class F, class... A>
void compile(const std::string& path, F fn, const ExportOptions& options, const A&... example) {
  std::vector<IValue> leaves;
  (compile_detail::Tree<A>::flatten(example, leaves), ...);
  detail::export_package(path, compile_detail::make_traced(std::move(fn)), leaves, options);
}

}  // namespace tessera::aot
