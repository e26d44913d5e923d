/** \file
 * NVRTC, loaded with dlopen (DESIGN.md D5): CUDA C++ to a cubin for one architecture, with only
 * the headers given in memory (no libcu++: it costs over a second per compile). NVRTC needs no
 * GPU, so machines without one still compile every generated kernel (the `nvrtc` test label).
 */
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tessera::runtime::cuda {

/** The loaded library: its path and version. */
struct NvrtcInfo {
  std::string path;
  int major = 0, minor = 0;
};
/** NVRTC, found under $CUDA_HOME/lib64, /usr/local/cuda/lib64 or by soname (libnvrtc.so.13,
 * libnvrtc.alt.so.13, ...); null when absent (`why` says where it looked). Thread-safe. */
const NvrtcInfo* nvrtc(std::string* why = nullptr);
/** Which NVRTC a compile would load, without loading it (a load takes 6-7 ms, more than a warm
 * process's first kernel otherwise costs): the first candidate file that exists, by its resolved
 * path, size and modification time; the loaded library's path and version when only the
 * loader's search path finds one; "none" without NVRTC. A key for compiled code. */
std::string nvrtc_identity();
/** The files a first compile reads: the NVRTC library a load would open (the first candidate
 * that exists, resolved) and its `libnvrtc-builtins` beside it (`.alt` for the `.alt` library).
 * Empty when no candidate file exists (the loader's search path alone is not looked through). */
std::vector<std::string> nvrtc_files();
/** Reads `nvrtc_files()` into the page cache from a background thread (plain reads: the
 * kernel's advice to read ahead covers one readahead window) and returns at once; the first call
 * only (later ones do nothing). Called as a device's context is made: NVRTC's ~110 MB, cold on a
 * fresh machine, then arrive while the context is created instead of during the first kernel's
 * compile (docs/decisions.md). Never loads the library. */
void prefetch_nvrtc();

/** What ptxas reports for a kernel (compiled with `-Xptxas=-v`). */
struct PtxasReport {
  int registers = -1;  ///< per thread; -1 when the log did not say
  int64_t stack_bytes = 0, spill_stores = 0, spill_loads = 0;
};
/** The resources ptxas reports in an NVRTC log (the last kernel's when there are several). */
PtxasReport parse_ptxas_log(const std::string& log);

/** What one compilation gives. */
struct CompiledCubin {
  std::string cubin;      ///< the binary, for cuModuleLoadData
  std::string log;        ///< the compiler's messages (warnings, ptxas's report), possibly empty
  double ms = 0;          ///< wall time of nvrtcCompileProgram
  PtxasReport resources;  ///< from the log when compiled with `-Xptxas=-v`
};

/** A header given to NVRTC in memory: the name `#include` uses, and its text. */
using Header = std::pair<std::string, std::string>;

/** Compiles `source` (named `name` in messages) to a cubin for `sm_<arch>` (90 for Hopper; "90a"
 * style suffixes go in `arch_suffix`). A compile error is a CompileError holding NVRTC's log and
 * naming the kernel; calls may run in parallel from many threads. */
/** The same to PTX for `compute_<arch>` (in `cubin`, NUL-terminated, for the driver's JIT). */
CompiledCubin compile_ptx(const std::string& source, const std::string& name, int arch,
                          const std::vector<Header>& headers = {},
                          const std::vector<std::string>& options = {},
                          const std::string& arch_suffix = "");
CompiledCubin compile_cubin(const std::string& source, const std::string& name, int arch,
                            const std::vector<Header>& headers = {},
                            const std::vector<std::string>& options = {},
                            const std::string& arch_suffix = "");

/** The same as relocatable LTO-IR (`-rdc=true -dlto`, in `cubin`) for nvJitLink to link with
 * precompiled device code (runtime/cuda/jitlink.h); NVRTC's ptxas options are left for the link. */
CompiledCubin compile_ltoir(const std::string& source, const std::string& name, int arch,
                            const std::vector<Header>& headers = {},
                            const std::vector<std::string>& options = {},
                            const std::string& arch_suffix = "");

}  // namespace tessera::runtime::cuda
