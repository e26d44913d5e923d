/** \file
 * The AOT package as data (docs/aot.md): the container (a header and a section table, each
 * section with its offset, size and SHA-256) and the model its manifest and schedule sections
 * encode. `decode` is the one reader of untrusted bytes: every count and string is bounded,
 * every value id, symbol, slot and parameter index is checked against what it refers to, and a
 * failure is a PackageError naming the section and the check. The exporter (export.cpp) builds a
 * Model; the runtime (runtime.cpp) runs one.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/aot.h"
#include "tessera/dtype.h"
#include "tessera/ivalue.h"

namespace tessera::aot_detail {

inline constexpr char kMagic[8] = {'T', 'S', 'P', 'K', 'G', '\r', '\n', '\x1a'};
/** 1.1: CUDA packages (the cuda-objects section). 1.2: the memory plan (an arena in the
 * schedule; planned allocations). Readers refuse sections they do not know and read every
 * earlier minor version. */
inline constexpr uint32_t kFormatMajor = 1, kFormatMinor = 2;
/** The calling convention of the packaged kernels (trt::KernelFn, trt::Arg, trt::Grid): a
 * change there bumps it, and older packages are refused rather than run. */
inline constexpr uint32_t kRuntimeAbi = 1;
/** Limits on what a package may declare (a hostile file cannot make the loader allocate more). */
inline constexpr size_t kMaxSections = 16, kMaxString = 1 << 16, kMaxCount = 1 << 20;

enum class SectionId : uint32_t {
  Manifest = 1,
  Schedule = 2,
  CpuObject = 3,
  Constants = 4,
  CudaObjects = 5,
};
const char* section_name(uint32_t id);

/** An integer known at call start: a constant, or output `slot` of the size program. */
struct SymRef {
  int64_t constant = 0;
  int64_t slot = -1;
};

struct Leaf {
  bool tensor = false;
  IValue constant;  ///< non-tensor leaves: the exact value
  DType dtype = DType::Float32;
  bool requires_grad = false;
  bool contiguous = false;
  std::vector<int64_t> sizes;    ///< -1 where symbolic
  std::vector<int32_t> symbol;   ///< per dim: the symbol, or -1
  std::vector<int64_t> strides;  ///< when not `contiguous`
  int64_t offset = 0;
};

struct Symbol {
  std::string name;  ///< the Dim's name
  uint32_t leaf = 0, dim = 0;
  int64_t min = 2, max = 2;
  int64_t example = 2;  ///< its size in the example
};

struct NodeArg {
  enum Kind : uint8_t { Value, ValueList, Sym, SymList, Constant, kKinds };
  uint8_t kind = Constant;
  int32_t value = -1;
  std::vector<int32_t> values;  ///< ValueList (-1: None)
  bool optional_list = false;
  SymRef sym;
  std::vector<SymRef> syms;
  IValue constant;
};

/** A kernel parameter's value at run time. */
struct Param {
  enum Kind : uint8_t { Pointer, Int, Float, Constexpr, kKinds };  ///< ir::ParamKind's order
  enum Source : uint8_t { FromConstant, FromValue, FromSym, kSources };
  uint8_t kind = Constexpr, source = FromConstant;
  int32_t value = -1;  ///< FromValue
  SymRef sym;          ///< FromSym
  int64_t i = 0;       ///< FromConstant ints
  double f = 0;        ///< FromConstant floats
  bool written = false;
};

/** One compiled specialization of a launch: its entry point in the shared object and what it
 * assumed of each parameter. */
struct Variant {
  enum Assume : uint8_t { Div16 = 1, IsOne = 2, Fits32 = 4 };
  std::string symbol;
  int64_t work_per_program = 1;
  std::vector<uint8_t> assume;  ///< per parameter
};

struct Node {
  enum Kind : uint8_t { Op, Kernel, kKinds };
  uint8_t kind = Op;
  std::string loc;  ///< the user's line, for messages
  // Op
  std::string op, schema_hash;
  std::vector<NodeArg> args;
  std::vector<int32_t> outputs;  ///< -1: not a tensor
  bool elide = false;
  SymRef elide_when;
  std::string elided_op, elided_hash;
  int32_t elided_drop = -1;
  /** An `aten::empty(size, dtype, device)` of the memory plan: its tensor lies `arena_offset`
   * bytes into the call's arena (format 1.2). */
  bool planned = false;
  SymRef arena_offset;
  // Kernel
  std::string kernel;
  std::vector<Param> params;
  SymRef grid[3];
  std::vector<Variant> variants;  ///< tried in order; the last assumes nothing
};

struct Constant {
  int32_t value = -1;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  uint64_t offset = 0, nbytes = 0;  ///< in the constants section
};

struct Output {
  int32_t value = -1;  ///< -1: `constant`
  IValue constant;
};

/** A CUDA package's code: one module per distinct kernel source (entry point
 * `tessera_kernel_<i>` of the schedule is module i, its kernel function `tessera_kernel`), with
 * its launch shape, and per architecture one cubin per module. */
struct CudaModule {
  uint32_t threads = 128;     ///< per block
  uint64_t shared_bytes = 0;  ///< dynamic shared memory per block
};
struct CudaArch {
  std::string name;                 ///< "sm_90", "sm_90a"
  std::vector<std::string> cubins;  ///< per module
};
struct CudaCode {
  std::vector<CudaModule> modules;
  std::vector<CudaArch> archs;
};

struct Model {
  // manifest
  std::string name, created_by, isa;
  uint32_t abi = kRuntimeAbi;
  std::vector<std::string> cpu_features;
  std::vector<Symbol> symbols;
  std::vector<Leaf> leaves;
  std::vector<std::pair<uint32_t, uint32_t>> alias_pairs;
  std::vector<uint8_t> prog_op;  ///< the size program (sym::Program::RawInstr, unpacked)
  std::vector<int32_t> prog_a, prog_b;
  std::vector<int64_t> prog_imm;
  std::vector<int32_t> prog_outputs;
  std::vector<std::string> guards;  ///< program outputs [0, guards.size()) are the guards
  std::vector<Output> outputs;
  // schedule
  uint32_t num_values = 0;
  std::vector<int32_t> inputs;  ///< per leaf: its value id, -1 for non-tensors
  std::vector<Constant> constants;
  std::vector<Node> nodes;
  /** The memory plan: one block per call on the package's device for the planned allocations
   * (format 1.2). */
  bool has_arena = false;
  SymRef arena_bytes;
  // cuda-objects (a CUDA package: its tensors live on a GPU, its kernels are cubins)
  bool cuda = false;
  CudaCode cuda_code;
};

/** The model's sections. */
std::string encode_manifest(const Model& m);
std::string encode_schedule(const Model& m);
std::string encode_cuda(const CudaCode& c);

/** "sm_90" -> {9, 0, false}, "sm_90a" -> {9, 0, true}, "compute_90" (PTX) -> {9, 0, false};
 * false when `name` is not of that form ("compute_90a": PTX is for plain versions). */
bool parse_arch(const std::string& name, int& major, int& minor, bool& specific);
/** Whether `name` is a PTX target ("compute_90"): text the driver compiles at load. */
bool is_ptx_arch(const std::string& name);
/** The index in `archs` of the architecture whose cubins a device of compute capability
 * major.minor runs: the same major and the highest minor not above the device's (an
 * arch-specific "a" target only on exactly its own), else the newest PTX not above the
 * device's version; -1 when none runs. */
int pick_arch(const std::vector<std::string>& archs, int major, int minor);
/** "tessera_kernel_<i>" -> i; -1 when `symbol` is not of that form. */
int64_t entry_index(const std::string& symbol);

/** A parsed container: the sections' bytes (views into `data`), checked against their digests. */
struct Container {
  std::shared_ptr<const void> keep;  ///< what holds the bytes: a string, or the file's mapping
  std::string_view data;
  std::string sha256;  ///< of the whole file
  uint32_t major = 0, minor = 0;
  std::vector<std::pair<uint32_t, std::string_view>> sections;
  std::string_view section(SectionId id) const;
};
std::string write_container(const std::vector<std::pair<SectionId, std::string>>& sections);
/** Parses and checks the container; `origin` names it in messages. */
Container read_container(std::string data, const std::string& origin);
/** The same over bytes that `keep` holds (a file mapping). */
Container read_container(std::shared_ptr<const void> keep, std::string_view data,
                         const std::string& origin);
/** Decodes and checks the model (manifest and schedule) of a container. */
Model decode(const Container& c, const std::string& origin);

/** The CPU features an x86-64 ISA level ("x86-64-v2", "-v3", "-v4") guarantees, whether this CPU
 * has one, the highest level it has, and which of `needed` it lacks. */
std::vector<std::string> isa_features(const std::string& isa);
bool cpu_has(const std::string& feature);
std::string host_isa();
std::vector<std::string> missing_cpu_features(const std::vector<std::string>& needed);

}  // namespace tessera::aot_detail
