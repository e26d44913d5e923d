#include "backend/cuda/emit.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "backend/common/c_expr.h"
#include "backend/common/c_family.h"
#include "ir/affine.h"
#include "ir/index_map.h"
#include "ir/materialize.h"
#include "ir/op_traits.h"
#include "ir/uses.h"
#include "tessera/env.h"
#include "tessera/error.h"

namespace tessera::backend::cuda {
namespace {

using namespace cfamily;

using ir::Op;
using ir::OpKind;
using ir::Region;
using ir::Storage;
using ir::Type;
using ir::ValueId;

int64_t numel(const SmallVector<int64_t, 4>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// "trt::Vec<T, w>" for `w` stored values of `elem`.
std::string vec_type(DType elem, int64_t w) {
  return "trt::Vec<" + std::string(storage_type(elem)) + ", " + std::to_string(w) + ">";
}

// Bytes of one element of an array holding values of type `t` (register values; pointers).
int64_t element_bytes(const Type& t) {
  if (t.ptr) return 8;
  switch (t.elem) {
    case DType::Float64:
    case DType::Int64:
    case DType::UInt64:
      return 8;
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool:
      return 1;
    case DType::Int16:
    case DType::UInt16:
      return 2;
    default:
      return 4;  // float32 and the narrow floats (computed in float registers), 32-bit ints
  }
}

class Emitter : ExprPrinter {
 public:
  Emitter(const ir::Function& f, int64_t max_shared, bool checked, int arch)
      : ExprPrinter(f, checked),
        max_shared_(max_shared),
        arch_(arch),
        affine_(f),
        affine_rem_(f, true) {
    threads_ = static_cast<int>(std::max<int64_t>(1, f.attrs.num_warps) * 32);
    reg_.assign(f_.num_values(), 0);
    same_elem_memo_.assign(f_.num_values(), -1);
    packed_memo_.assign(f_.num_values(), -1);
    mma_operand_.assign(f_.num_values(), 0);
    plan_mma(f_.body);
    if (!checked) plan_vectors(f_.body);
    for (const MmaLayout& m : mma_) set_vec(m.shape, 2);  // runs of two columns
    if (!checked) plan_slices();
    plan_mma_operands(f_.body);
    number_ops(f_.body);
    live_words_.assign(static_cast<size_t>(positions_) + 1, 0);
    plan_registers(f_.body);                      // the loops' arrays first
    plan_registers(f_.body, 0, /*loops=*/false);  // then the others
  }

  Emitted run() {
    header();
    region(f_.body);
    // The last loop's barrier protects nothing: the kernel ends there.
    std::string body = out_.str();
    const std::string barrier = "  __syncthreads();\n";
    if (body.size() >= barrier.size() &&
        body.compare(body.size() - barrier.size(), barrier.size(), barrier) == 0) {
      body.resize(body.size() - barrier.size());
      out_.str(body);
      out_.seekp(0, std::ios_base::end);
    }
    --indent_;
    line("}");
    line("}  // namespace tessera");
    if (smem_ > max_shared_) {
      TS_ERROR(CompileError) << "[kernel " << f_.name << "] its tiles need " << smem_
                             << " bytes of shared memory on the CUDA backend, above the device's "
                             << max_shared_
                             << " (this stage keeps every stored tile in shared memory: smaller "
                                "blocks fit)";
    }
    Emitted e;
    e.source = out_.str();
    if (!wgmma_ops_.empty()) {  // wgmma: the instructions' definitions, and the sm_90a target
      const size_t at = e.source.find("struct _Slots");
      e.source.insert(at, wgmma_definitions());
      e.source.insert(0, std::string(kSm90aMarker) + "\n");
      const std::string small = "__align__(16) unsigned char _smem[]";
      const size_t sm = e.source.find(small);
      e.source.replace(sm, small.size(), "__align__(1024) unsigned char _smem[]");
    }
    e.shared_bytes = smem_;
    e.threads = threads_;
    e.sites = sites_;
    return e;
  }

 private:
  void header() {
    preamble(" (CUDA, stage 2)", "tessera/trt/cuda.h", /*cuda=*/true);
    const size_t slots = std::max<size_t>(1, f_.params.size() + (checked_ ? 1 : 0));
    out_ << "struct _Slots { trt::Arg a[" << slots << "]; };\n\n";
    // The kernel's own name in a namespace of its own (profilers show
    // `tessera::add_kernel(trt::Grid, _Slots)`); the module's entry is entry_symbol(name).
    out_ << "namespace tessera {\n__global__ void __launch_bounds__(" << threads_ << ") "
         << entry_name(f_.name) << "(const trt::Grid _gv, const _Slots _s) {\n";
    indent_ = 1;
    line("extern __shared__ __align__(16) unsigned char _smem[];");
    line("const trt::Grid* const _g = &_gv;");
    line("const trt::Arg* const _a = _s.a;");
    line(
        "const int32_t _pid0 = (int32_t)blockIdx.x, _pid1 = (int32_t)blockIdx.y, "
        "_pid2 = (int32_t)blockIdx.z;");
    line("const int32_t _tid = (int32_t)threadIdx.x;");
    line("(void)_g; (void)_a; (void)_pid0; (void)_pid1; (void)_pid2; (void)_tid;");
    declare_params("trt::GpuDebug", /*aligned=*/false);
  }

  // ---- register arrays --------------------------------------------------------------------------
  //
  // Every unrolled loop over a shape gives each element to the same thread at the same position
  // (its runs, below). A tile whose every reader evaluates it at the reader's own element
  // (elementwise ops over the same shape, stores, block-wide reductions, loop-carried
  // assignments) is therefore only ever read by the thread that computed the element: it lives in
  // that thread's registers, an array indexed by the unrolled loop's counter, with no shared
  // memory and no barrier. Loads are materialized this way too (not recomputed at their
  // consumer), so all of a thread's loads are in flight before the first use.

  Storage storage(ValueId v) const override {
    if (reg_[static_cast<size_t>(v)]) return Storage::Array;
    if (mma_operand_[static_cast<size_t>(v)]) return Storage::Inline;
    return plan_.storage(v);
  }
  bool in_registers(ValueId v) const { return reg_[static_cast<size_t>(v)] != 0; }

  // Elements per thread of an unrolled loop over `shape` (runs of vec_of(shape)).
  int64_t per_thread(const SmallVector<int64_t, 4>& shape) const {
    if (const MmaLayout* m = slice_of(shape)) return 2 * slice_tm(*m);
    const int64_t run = vec_of(shape) * threads_;
    return (numel(shape) + run - 1) / run * vec_of(shape);
  }

  // ---- vector accesses --------------------------------------------------------------------------
  //
  // An unrolled loop over a shape gives each thread runs of V consecutive elements (thread t takes
  // elements [tV, tV + V), then [(T + t)V, (T + t)V + V), ...), so that a load or store whose
  // pointer is contiguous along the last dimension and aligned to V elements is one vector access
  // of up to 16 bytes (trt::Vec: ld.global.v4 in the PTX) when its lanes' masks all hold, and
  // scalar accesses otherwise. V is chosen per shape, from the widest such access; every unrolled
  // loop over the shape uses the same runs, so register arrays stay each thread's own.

  int64_t vec_of(const SmallVector<int64_t, 4>& shape) const {
    for (const auto& [s, v] : vec_) {
      if (s == shape) return v;
    }
    return 1;
  }
  void set_vec(const SmallVector<int64_t, 4>& shape, int64_t w) {
    auto it =
        std::find_if(vec_.begin(), vec_.end(), [&](const auto& e) { return e.first == shape; });
    if (it == vec_.end()) {
      vec_.emplace_back(shape, w);
    } else {
      it->second = w;
    }
  }

  // ---- the Mma layout ---------------------------------------------------------------------------
  //
  // The result shape [M, N] of a dot that runs on tensor cores with its accumulator in registers
  // (trt::mma_tile) gives its elements to threads as mma.sync's accumulator fragments: the warps
  // form a WM x WN grid over the tile, each warp a rectangle of TM x TN tiles of 16 x 8, and in
  // each tile lane 4g + t holds row g, columns 2t and 2t + 1, then row g + 8 (PTX ISA,
  // m16n8k16). A thread's runs (two columns each) are numbered r = 2 (i TN + j) + h for tile
  // (i, j) and row half h, so its slots are the accumulator registers in mma_tile's order. Every
  // register array of the shape uses this layout (loads and stores of it take two-element runs),
  // so the epilogue reads the accumulator where it lies.

  struct MmaLayout {
    SmallVector<int64_t, 4> shape;
    int64_t wm = 1, wn = 1;  // the warps' grid
  };
  const MmaLayout* mma_layout(const SmallVector<int64_t, 4>& shape) const {
    for (const MmaLayout& m : mma_) {
      if (m.shape == shape) return &m;
    }
    return nullptr;
  }

  // ---- the row-slice layout -------------------------------------------------------------------
  //
  // A 1-D shape [M] whose values are rows of Mma-layout tiles [M, N] (attention's running max and
  // sum, `max(qk, 1)`, the rescale factor) gives each thread the rows it holds in those tiles:
  // rows `mma_row(m, q / 2, q & 1)` for q in [0, 2 TM), the same in each lane of a row's quad (so
  // the layout is not a partition: four lanes compute each element). Then a row reduction leaves
  // its result in the registers of every lane that reduced (the quad's shuffles give all four the
  // total), the row vectors' arithmetic is each thread's own, and a tile's broadcast of a row
  // vector (`m[:, None]`) reads the thread's own register: no shared memory and no barrier. Only
  // for shapes whose every value is used so (plan_slices); stores from the layout are made by the
  // quad's first lane.
  const MmaLayout* slice_of(const SmallVector<int64_t, 4>& shape) const {
    if (shape.size() != 1) return nullptr;
    for (const auto& [rows, m] : slices_) {
      if (rows == shape[0]) return &mma_[m];
    }
    return nullptr;
  }
  int64_t slice_tm(const MmaLayout& m) const { return m.shape[0] / m.wm / 16; }
  // The row of slot `q` (an expression) of a row-slice array.
  std::string slice_row(const MmaLayout& m, const std::string& q) const {
    return mma_row(m, "((" + q + ") >> 1)", "((" + q + ") & 1)");
  }
  // The row-slice slot of the row of run `run` (an expression) of a loop over an Mma shape
  // [M, N]: run 2 (i TN + j) + h holds row tile i, half h.
  static std::string slice_slot_of_run(const MmaLayout& m, const std::string& run) {
    const int64_t tn = m.shape[1] / m.wn / 8;
    return "((" + run + ") / " + std::to_string(2 * tn) + " * 2 + ((" + run + ") & 1))";
  }
  // The Mma layout whose rows shape [M] would slice: every Mma layout of M rows has one warp
  // column and the same warp rows (the same rows per thread); nullptr if none or they differ.
  const MmaLayout* slice_source(int64_t M) const {
    const MmaLayout* found = nullptr;
    for (const MmaLayout& m : mma_) {
      if (m.shape[0] != M) continue;
      if (m.wn != 1 || (found && found->wm != m.wm)) return nullptr;
      if (!found) found = &m;
    }
    return found;
  }
  // Whether `v` (a value of shape [M], or a [M, 1] expansion of one) is used only in ways the
  // row-slice layout serves: elementwise ops of its shape, stores of it, loop-carried
  // assignments, and broadcasts of its expansion to Mma-layout tiles of M rows.
  bool slice_uses_ok(ValueId v, int64_t M) {
    const auto& shape = f_.type(v).shape;
    for (const ir::Use& u : uses_.uses(v)) {
      const Op& o = *u.user;
      switch (o.kind) {
        case OpKind::Yield:
        case OpKind::For:
        case OpKind::While:
        case OpKind::If:
          if (shape.size() != 1) return false;
          continue;
        case OpKind::Store:
          if (shape.size() != 1 || f_.type(o.operands[0]).shape != shape) return false;
          continue;
        case OpKind::ExpandDims:
          if (shape.size() != 1 || f_.type(o.result()).shape != SmallVector<int64_t, 4>{M, 1} ||
              !slice_uses_ok(o.result(), M))
            return false;
          continue;
        case OpKind::Broadcast: {  // (read by the tile's loops at their own rows)
          const auto& to = f_.type(o.result()).shape;
          if (shape.size() != 2 || to.size() != 2 || to[0] != M || !mma_layout(to) ||
              plan_.storage(o.result()) != Storage::Inline || !same_element(o.result()))
            return false;
          continue;
        }
        default:
          break;
      }
      // (an expansion [M, 1] goes straight to its broadcasts: a loop over [M, 1] has no slice)
      if (shape.size() != 1 || !ir::traits(o.kind).has(ir::kElementwise) ||
          f_.type(o.result()).shape != shape)
        return false;
    }
    return true;
  }
  // Which 1-D shapes take the row-slice layout: [M] for an Mma layout of M rows (one warp
  // column) when every value of that shape is a row reduction of such a tile or elementwise
  // (constants, ranges, loads, arithmetic, loop-carried values), and each that is materialized is
  // used as slice_uses_ok says (one computed where it is used, attention's `offs_d` when
  // BLOCK_DMODEL is BLOCK_M, may be used anyhow but by a reduction, an atomic or a print).
  void plan_slices() {
    std::map<int64_t, size_t> candidates;
    for (size_t i = 0; i < mma_.size(); ++i) {
      const int64_t M = mma_[i].shape[0];
      if (slice_source(M) == &mma_[i] && M / mma_[i].wm >= 16) candidates.emplace(M, i);
    }
    for (const auto& [M, m] : candidates) {
      bool ok = true, reduced = false;
      for (size_t v = 0; v < f_.num_values() && ok; ++v) {
        const ValueId id = static_cast<ValueId>(v);
        const Type& t = f_.type(id);
        if (t.shape.size() != 1 || t.shape[0] != M) continue;
        const Op* d = f_.def(id);
        if (d && d->kind == OpKind::Reduce) {
          ok = mma_row_reduction(*d);  // (its tile has M rows: one warp column, slice_source)
          reduced = true;
        } else if (d && !ir::traits(d->kind).has(ir::kElementwise) && d->kind != OpKind::Load &&
                   d->kind != OpKind::Constant && d->kind != OpKind::Splat &&
                   d->kind != OpKind::Arange && d->kind != OpKind::For &&
                   d->kind != OpKind::While && d->kind != OpKind::If) {
          ok = false;
        }
        // A value computed where it is used (not a load: loads are materialized) has no
        // layout of its own: only its users that loop over [M] themselves matter.
        if (plan_.storage(id) == Storage::Inline && !(d && d->kind == OpKind::Load)) {
          for (const ir::Use& u : uses_.uses(id)) {
            const OpKind k = u.user->kind;
            ok = ok && k != OpKind::Reduce && k != OpKind::ReduceFn && k != OpKind::ScanFn &&
                 k != OpKind::Atomic && k != OpKind::AtomicCas && k != OpKind::Print &&
                 k != OpKind::Assert;
          }
          continue;
        }
        ok = ok && slice_uses_ok(id, M);
      }
      if (ok && reduced) {
        slices_.emplace_back(M, m);
        set_vec({M}, 1);
      }
    }
  }

  // Whether dot `op` can run on tensor cores: float16 or bfloat16 operands (mma.sync.m16n8k16),
  // or float32 ones at tf32 precision (m16n8k8), of one type, a float32 result, whole tiles.
  bool mma_dot_types(const Op& op) const {
    const Type& at = f_.type(op.operands[0]);
    const Type& ot = f_.type(op.result());
    const DType el = at.elem;
    const int64_t M = ot.shape[0], N = ot.shape[1], K = at.shape[1];
    const bool shapes = knobs().cuda_mma && f_.type(op.operands[1]).elem == el &&
                        ot.elem == DType::Float32 && ot.shape.size() == 2 && M % 16 == 0 &&
                        N % 8 == 0 && threads_ % 32 == 0;
    if (tf32_dot(op)) return shapes && K % 8 == 0;
    return shapes && (el == DType::Float16 || el == DType::BFloat16) && K % 16 == 0;
  }
  // A float32 dot at tf32 precision (Triton's default): mma.sync.m16n8k8 on tf32-rounded values.
  bool tf32_dot(const Op& op) const {
    return f_.type(op.operands[0]).elem == DType::Float32 &&
           f_.type(op.operands[1]).elem == DType::Float32 &&
           static_cast<ir::DotPrecision>(op.sub) == ir::DotPrecision::TF32;
  }
  // A tensor-core dot operand's tile in shared memory: row-major with padded rows (mma.sync's
  // ldmatrix), or for wgmma the swizzled layouts of trt::wgmma_a_index / wgmma_b_index.
  struct OperandTile {
    int64_t rows = 0, cols = 0, pitch = 0;
    std::string index;    // wgmma: the index function ("trt::wgmma_a_index<M, TM, S>"); else ""
    bool kmajor = false;  // B stored by columns (rows of `pitch` K elements): k_major_b
    int64_t elems() const { return !index.empty() ? rows * cols : (kmajor ? cols : rows) * pitch; }
    int64_t align() const { return index.empty() ? 16 : 1024; }  // (a swizzle pattern's bytes)
    std::string at(const std::string& r, const std::string& c) const {
      if (!index.empty()) return index + "(" + r + ", " + c + ")";
      if (kmajor) return c + " * " + std::to_string(pitch) + " + " + r;
      return r + " * " + std::to_string(pitch) + " + " + c;
    }
  };
  // Dot operand `k` (0: A, 1: B) in shared memory. mma.sync: rows padded by 16 bytes (ldmatrix's
  // eight rows in distinct banks); tf32's A by 4 floats (its fragment's 32 lanes). wgmma: A
  // K-major with its rows in warpgroup order, B N-major, both in swizzle rows. A B whose K is
  // contiguous in memory (k_major_b) is stored K-major on either path.
  OperandTile operand_layout(const Op& dot, size_t k) const {
    const auto& shape = f_.type(dot.operands[k]).shape;
    OperandTile t;
    t.rows = shape[0];
    t.cols = shape[1];
    t.kmajor = k == 1 && k_major_b(dot);
    t.pitch = t.kmajor ? t.rows + 8 : t.cols + (tf32_dot(dot) ? (k == 0 ? 4 : 8) : 8);
    if (wgmma_registers(dot)) {
      t.pitch = t.cols;
      const int64_t warps = threads_ / 32;
      const std::string r = std::to_string(t.rows), c = std::to_string(t.cols);
      if (k == 0)
        t.index = "trt::wgmma_a_index<" + r + ", " + std::to_string(t.rows / (16 * warps)) + ", " +
                  std::to_string(swizzle_of(t.cols * 2)) + ">";
      else if (t.kmajor)
        t.index = "trt::wgmma_bk_index<" + c + ", " + std::to_string(swizzle_of(t.rows * 2)) + ">";
      else
        t.index = "trt::wgmma_b_index<" + r + ", " + std::to_string(swizzle_of(t.cols * 2)) + ">";
    }
    return t;
  }

  // Whether dot `op`'s B tile is stored K-major (column n of B a row of the tile: wgmma's own B,
  // and mma.sync's ldmatrix without .trans): a 16-bit load used only by the dot and copied from
  // global memory, whose pointer is contiguous along K and not along N in either version of the
  // access (x @ w.T's w, attention's k loaded transposed), and whose pointer, mask and other
  // read no register array (the copy runs down the tile's columns, in no register layout). Copied
  // as a row-major tile, such a B is read an element at a time, two bytes a request.
  bool k_major_b(const Op& op) const {
    const ValueId v = op.operands[1];
    const Op* d = f_.def(v);
    if (checked_ || tf32_dot(op) || !mma_dot_types(op) || op.operands[0] == v || !d ||
        d->kind != OpKind::Load || storage(v) != Storage::Inline || uses_.uses(v).size() != 1)
      return false;
    bool along_k = false;
    for (const ir::AffineInfo* forms : {&affine_, &affine_rem_}) {
      const ir::AffineForm* form = forms->loose_form(d->operands[0]);
      if (!form || form->coef.size() != 2 || (form->coef_known(1) && form->coef[1] == 1)) continue;
      along_k = along_k || (form->coef_known(0) && form->coef[0] == 1);
    }
    if (!along_k) return false;
    std::set<ValueId> seen;
    for (ValueId o : d->operands)
      if (reads_registers(o, seen)) return false;
    return true;
  }
  // Whether computing `v` inline reads a register array.
  bool reads_registers(ValueId v, std::set<ValueId>& seen) const {
    if (!seen.insert(v).second) return false;
    if (in_registers(v)) return true;
    const Op* d = f_.def(v);
    if (!d || f_.type(v).is_scalar() || storage(v) != Storage::Inline) return false;
    for (ValueId o : d->operands)
      if (reads_registers(o, seen)) return true;
    return false;
  }
  // The dot whose K-major B load `op` is, if it is one (copied down its columns: copy_plan).
  bool k_major_load(const Op& op) const {
    if (op.kind != OpKind::Load || op.results.size() != 1) return false;
    const auto& us = uses_.uses(op.result());
    if (us.size() != 1) return false;
    const Op& d = *us.front().user;
    return d.kind == OpKind::Dot && d.operands[1] == op.result() && in_registers(d.result()) &&
           k_major_b(d);
  }

  // The swizzle row (bytes) of a wgmma operand tile whose rows hold `bytes`: the widest of 128,
  // 64 and 32 that divides them; 0 if none does.
  static int64_t swizzle_of(int64_t bytes) {
    for (int64_t s : {128, 64, 32}) {
      if (bytes % s == 0) return s;
    }
    return 0;
  }
  // Whether dot `op` can run on Hopper's wgmma (trt::wgmma_tile): an sm_90 target, float16 or
  // bfloat16 operands (two distinct values: A and B are stored differently), warpgroups of whole
  // 64-row blocks (the warps in one column, each TM tiles of 16 rows), operand rows whose bytes
  // a swizzle row divides, N up to 256 per instruction.
  bool wgmma_dot(const Op& op) const {
    if (arch_ < 90 || !knobs().cuda_wgmma || !mma_dot_types(op) || tf32_dot(op) ||
        op.operands[0] == op.operands[1])
      return false;
    const int64_t warps = threads_ / 32;
    const int64_t M = f_.type(op.result()).shape[0], N = f_.type(op.result()).shape[1];
    const int64_t K = f_.type(op.operands[0]).shape[1];
    return warps % 4 == 0 && M % (16 * warps) == 0 && swizzle_of(K * 2) != 0 &&
           swizzle_of(N * 2) != 0 && (N <= 256 || N % 256 == 0);
  }
  // Whether dot `op` runs on wgmma: it can, and its result's Mma layout is the warps in a column.
  bool wgmma_registers(const Op& op) const {
    if (!wgmma_dot(op)) return false;
    const MmaLayout* m = mma_layout(f_.type(op.result()).shape);
    return m && m->wn == 1 && m->wm == threads_ / 32 && in_registers(op.result());
  }

  // Whether wgmma dot `op` reads A from registers (trt::wgmma_issue_rs): A is computed in the
  // block (not a load the dot copies, not a tile staged or hoisted into shared memory) over a
  // shape whose layout is the accumulator's (the Mma layout with the warps in one column), so
  // that each thread computes exactly the A fragments of its own rows (attention's `p @ v`).
  bool wgmma_a_registers(const Op& op) const {
    if (!knobs().cuda_wgmma_rs || !wgmma_registers(op)) return false;
    const ValueId a = op.operands[0];
    const Op* d = f_.def(a);
    if (!d || staged_.count(a) || (d->kind == OpKind::Load && storage(a) == Storage::Inline))
      return false;
    const MmaLayout* m = mma_layout(f_.type(a).shape);
    return m && m->wn == 1 && m->wm == threads_ / 32;
  }
  // Whether dot `op` is the last tensor-core dot (accumulator in registers) of loop body `body`'s
  // own ops.
  bool last_mma_of(const Op& op, const Region& body) const {
    for (auto it = body.ops.rbegin(); it != body.ops.rend(); ++it) {
      if ((*it)->kind == OpKind::Dot && in_registers((*it)->result())) return *it == &op;
    }
    return false;
  }

  // The warps' grid for an M x N accumulator: every warp whole 16 x 8 tiles, the rectangle with
  // the fewest rows plus columns (a warp loads fragments for each of its rows and columns).
  static bool warp_grid(int64_t M, int64_t N, int64_t warps, MmaLayout& out) {
    bool found = false;
    for (int64_t wm = 1; wm <= warps; ++wm) {
      if (warps % wm != 0) continue;
      const int64_t wn = warps / wm;
      if (M % (16 * wm) != 0 || N % (8 * wn) != 0) continue;
      if (!found || M / wm + N / wn < M / out.wm + N / out.wn) {
        out.wm = wm;
        out.wn = wn;
        found = true;
      }
    }
    return found;
  }

  void plan_mma(const Region& r) {
    for (const Op* op : r.ops) {
      for (const Region& sub : op->regions) plan_mma(sub);
      if (op->kind != OpKind::Dot || !mma_dot_types(*op)) continue;
      const auto& shape = f_.type(op->result()).shape;
      if (mma_layout(shape)) continue;
      MmaLayout m;
      m.shape = shape;
      if (wgmma_dot(*op)) {  // wgmma: the warps in one column, each warpgroup 64-row blocks
        m.wm = threads_ / 32;
        m.wn = 1;
        mma_.push_back(m);
      } else if (warp_grid(shape[0], shape[1], threads_ / 32, m)) {
        mma_.push_back(m);
      }
    }
  }

  // A load used only as an operand of a tensor-core dot stays inline whatever the materialization
  // plan says (it stores gathers once for the CPU's loops): the dot copies it once, bits
  // unchanged, into shared memory (operand_tile), the copy the pipeline makes asynchronous.
  // So is a load that reaches a dot operand from outside the dot's region (a loop-invariant
  // operand, converted into its tile once before the loop: hoist_operand) only through
  // single-use elementwise ops whose other operands are scalars or splats of them (attention's
  // `(q * scale).to(bf16)`): the conversion reads global memory directly instead of a copy of
  // the load in shared memory (32 KB of floats for attention's 128 x 64 q).
  void plan_mma_operands(const Region& r) {
    for (const Op* op : r.ops) {
      for (const Region& sub : op->regions) plan_mma_operands(sub);
      if (op->kind != OpKind::Dot || !mma_in_registers(*op)) continue;
      for (size_t k = 0; k < 2; ++k) {
        const ValueId v = op->operands[k];
        const Op* d = f_.def(v);
        if (!d || uses_.uses(v).size() != 1 || op->operands[0] == op->operands[1]) continue;
        if (d->kind == OpKind::Load) {
          mma_operand_[static_cast<size_t>(v)] = 1;
          continue;
        }
        if (std::find(r.ops.begin(), r.ops.end(), d) != r.ops.end()) continue;  // (not hoisted)
        for (ValueId x = v; d && uses_.uses(x).size() == 1;) {
          if (d->kind == OpKind::Load) {
            mma_operand_[static_cast<size_t>(x)] = 1;
            break;
          }
          if (d->kind != OpKind::Binary && d->kind != OpKind::Unary && d->kind != OpKind::Cast)
            break;
          ValueId next = ir::kNoValue;
          int tiles = 0;
          for (ValueId o : d->operands) {
            const Op* od = f_.def(o);
            const bool uniform =
                f_.type(o).is_scalar() ||
                (od && (od->kind == OpKind::Splat || od->kind == OpKind::Constant));
            if (!uniform) {
              next = o;
              ++tiles;
            }
          }
          if (tiles != 1) break;
          x = next;
          d = f_.def(x);
        }
      }
    }
  }

  // The row this thread holds in tile row `i` (of its warp's TM) and row half `h` of the Mma
  // layout `m` (expressions).
  static std::string mma_row(const MmaLayout& m, const std::string& i, const std::string& h) {
    return "(_tid >> 5) / " + std::to_string(m.wn) + " * " + std::to_string(m.shape[0] / m.wm) +
           " + " + i + " * 16 + ((_tid & 31) >> 2) + " + h + " * 8";
  }
  // The index variables of slot 2 * run + col of this thread in the Mma layout `m` (run and col
  // are expressions).
  Index mma_index(const MmaLayout& m, const std::string& run, const std::string& col) {
    const int64_t N = m.shape[1];
    const int64_t tn = N / m.wn / 8;
    const std::string r = fresh("_i"), c = fresh("_i");
    line("const int32_t " + r + " = " +
         mma_row(m, "((" + run + ") >> 1) / " + std::to_string(tn), "((" + run + ") & 1)") + ";");
    line("const int32_t " + c + " = (_tid >> 5) % " + std::to_string(m.wn) + " * " +
         std::to_string(N / m.wn) + " + ((" + run + ") >> 1) % " + std::to_string(tn) +
         " * 8 + (_tid & 3) * 2 + " + col + ";");
    return {r, c};
  }

  // The widest vector (elements, a power of two, at most 16 bytes) for an access through the
  // pointer tile `p`: contiguous along the last dimension (or dimension `dim`), each run's first
  // address aligned. `forms`: the affine forms to go by (else those of the code being written).
  int64_t widest_access(ValueId p, const ir::AffineInfo* forms = nullptr, int dim = -1) const {
    const Type& pt = f_.type(p);
    if (pt.is_scalar()) return 1;
    const ir::AffineForm* form = (forms ? forms : aff_)->loose_form(p);
    const int64_t b = static_cast<int64_t>(itemsize(pt.elem));
    const size_t last = dim < 0 ? pt.shape.size() - 1 : static_cast<size_t>(dim);
    // (A pointer's coefficients count elements; its base's divisibility, bytes. The other
    // dimensions' strides need only be multiples of w: `rows * K` with K divisible by 16 is.)
    if (!form || form->coef.size() != pt.shape.size() || !form->coef_known(last) ||
        form->coef[last] != 1)
      return 1;
    for (int64_t w = 16 / b; w > 1; w /= 2) {
      bool ok = pt.shape[last] % w == 0 && form->divisibility % (w * b) == 0;
      for (size_t d = 0; d < pt.shape.size(); ++d)
        ok = ok && (d == last || form->coef_divisibility(d) % w == 0);
      if (ok) return w;
    }
    return 1;
  }

  // The vector width of access `op` (a load into registers or a store), 1 for scalar accesses.
  int64_t access_width(const Op& op, const ir::AffineInfo* forms = nullptr) const {
    if (checked_) return 1;
    const auto& shape = f_.type(op.operands[0]).shape;
    return std::min(vec_of(shape), widest_access(op.operands[0], forms));
  }

  // Tutorial 03's `offs = (pid * BLOCK + arange(0, BLOCK)) % M`, or a broadcast bias's
  // `b + (pid * BLOCK + arange(0, BLOCK)) % N` in a fused kernel over rows of N: a remainder in a
  // pointer's offsets makes each lane's address its own (an integer division, and no vector
  // access). Where every such `x % m` has m uniform and x affine (x = B + offsets, B uniform),
  // versioned_access writes the access twice: under the block-uniform guard that the tile does
  // not wrap (x >= 0, and 0 <= B % m + offsets < m: every block but those that straddle a
  // multiple of m), with each remainder as x - (B - B % m), so the address is affine and the
  // access as wide as its pointer allows; else as it is.
  //
  // rems_to_version: the remainders on the way to pointer `p` (true when there are some and
  // the fast version would write each of them as its operand: offset_expr's path, inline values,
  // 32-bit or narrower; any other `%` that affine_rem_ took as x leaves the access unversioned).
  bool rems_to_version(ValueId p, std::vector<const Op*>& rems) const {
    if (checked_) return false;
    bool ok = true;
    rem_path(p, /*offsets=*/false, rems, ok);
    return ok && !rems.empty();
  }
  // `offsets`: `v` is printed by offset_expr (the offsets of an addptr, and on down through its
  // +, -, * and views); else by expr, which writes every `%` as a division.
  void rem_path(ValueId v, bool offsets, std::vector<const Op*>& rems, bool& ok) const {
    const Op* op = f_.def(v);
    const Type& t = f_.type(v);
    if (!ok || !op || t.is_scalar()) return;  // scalars: uniform leaves of the forms
    const bool inl = storage(v) == Storage::Inline;
    const bool narrow =
        is_signed(t.elem) && !is_floating_point(t.elem) && t.elem != DType::Int64 && !t.ptr;
    offsets = offsets && inl && narrow;
    switch (op->kind) {
      case OpKind::AddPtr:
        rem_path(op->operands[0], false, rems, ok);
        rem_path(op->operands[1], inl, rems, ok);
        return;
      case OpKind::Splat:
      case OpKind::Broadcast:
      case OpKind::ExpandDims:
        rem_path(op->operands[0], offsets, rems, ok);
        return;
      case OpKind::Permute:
        rem_path(op->operands[0], false, rems, ok);
        return;
      case OpKind::Binary: {
        const auto k = static_cast<ir::BinaryKind>(op->sub);
        if (k == ir::BinaryKind::Rem) {
          const ir::AffineForm* m = affine_.loose_form(op->operands[1]);
          const bool candidate = offsets && m && m->uniform() && affine_.form(op->operands[0]);
          if (!candidate) {
            // (affine_rem_ gives it x's form only when x has one and m is uniform)
            const ir::AffineForm* x = affine_.loose_form(op->operands[0]);
            if (m && m->uniform() && x && x->coefs_known()) ok = false;
            return;
          }
          if (std::find(rems.begin(), rems.end(), op) == rems.end()) rems.push_back(op);
          return;
        }
        if (k != ir::BinaryKind::Add && k != ir::BinaryKind::Sub && k != ir::BinaryKind::Mul)
          return;  // no form goes through it
        rem_path(op->operands[0], offsets, rems, ok);
        rem_path(op->operands[1], offsets, rems, ok);
        return;
      }
      default:
        return;
    }
  }

  // Writes access `op` (a load, a store, a dot operand's copy) by `gen`, versioned on the
  // remainders in its pointer (see above).
  void versioned_access(const Op& op, const std::function<void()>& gen) {
    std::vector<const Op*> rems;
    if (!rem_identity_.empty() || !rems_to_version(op.operands[0], rems)) return gen();
    // Only where the fast version is wider: the guard and a second copy of the access cost
    // code, and a scalar access gains little from addresses without divisions.
    if (access_width(op, &affine_rem_) <= access_width(op, &affine_)) return gen();
    std::vector<std::string> guard;
    for (const Op* r : rems) {
      const ir::AffineForm& x = *affine_.form(r->operands[0]);
      const ir::AffineForm& m = *affine_.loose_form(r->operands[1]);
      const auto& shape = f_.type(r->result()).shape;
      int64_t lo = 0, hi = 0;
      for (size_t d = 0; d < shape.size(); ++d) {
        const int64_t e = x.coef[d] * (shape[d] - 1);
        (e < 0 ? lo : hi) += e;
      }
      const std::string base = uniform_expr(affine_, x.base);
      const std::string mod = uniform_expr(affine_, m.base);
      auto add = [&](std::string c) {
        if (std::find(guard.begin(), guard.end(), c) == guard.end()) guard.push_back(std::move(c));
      };
      for (std::string& c : rem_no_straddle_guards(base, mod, lo, hi)) add(std::move(c));
      if (!x.exact && f_.type(r->operands[0]).elem != DType::Int64)
        add("trt::fits_i32(" + base + ", " + std::to_string(lo) + ", " + std::to_string(hi) + ")");
    }
    std::string cond;
    for (const auto& g : guard) cond += (cond.empty() ? "" : " && ") + g;
    line("if (" + cond + ") {");
    ++indent_;
    ++branched_;  // each version in its own block: no load's second pass waits past it
    rem_identity_ = rems;
    aff_ = &affine_rem_;
    gen();
    aff_ = &affine_;
    rem_identity_.clear();
    --indent_;
    line("} else {");
    ++indent_;
    gen();
    --branched_;
    --indent_;
    line("}");
  }
  bool rem_is_identity(const Op& op, const Index&) override {
    return std::find(rem_identity_.begin(), rem_identity_.end(), &op) != rem_identity_.end();
  }
  std::string rem_shift(const Op& op, const Index&) override {
    return rem_shift_expr(uniform_expr(affine_, affine_.form(op.operands[0])->base),
                          uniform_expr(affine_, affine_.loose_form(op.operands[1])->base));
  }

  // Whether register array `v` keeps its 16-bit floats packed, two per 32-bit register, widened
  // where they are read: a float16/bfloat16 load whose every run is one vector access of an even
  // width (its masks agree along runs, or there are none). Converting at the load instead holds
  // twice the registers (a bf16 layer norm: 48 registers and 5 blocks per SM instead of 40 and
  // 6, 2657 against 3144 GB/s on an H200; bench/experiments/ln_run.sh).
  bool packed(ValueId v) {
    int8_t& memo = packed_memo_[static_cast<size_t>(v)];
    if (memo < 0) {
      const Type& t = f_.type(v);
      const Op* op = f_.def(v);
      memo = 0;
      if (in_registers(v) && (t.elem == DType::BFloat16 || t.elem == DType::Float16) && op &&
          op->kind == OpKind::Load && vec_of(t.shape) % 2 == 0) {
        // (the array's layout holds in both versions of a versioned_access: the plain forms)
        const int64_t w = access_width(*op, &affine_);
        memo = w >= 2 && w % 2 == 0 && (op->operands.size() < 2 || lanes_agree(op->operands[1], w));
      }
    }
    return memo == 1;
  }

  // Whether the boolean tile `m` is equal on every `w` consecutive lanes of its last dimension that
  // start at a multiple of `w` (Triton's constancy, from the affine forms): then a run's access is
  // all or nothing and needs no per-lane fallback. `offs < n` with `offs` advancing by one along
  // the run and both sides' bases multiples of `w` (n an argument divisible by 16) is; masks of
  // other dimensions and their conjunctions are. (Offsets are assumed not to wrap int32, as by
  // Triton; the checked mode, which reports a wrap, keeps scalar accesses.)
  // (`dim`: runs along that dimension instead of the last.)
  bool lanes_agree(ValueId m, int64_t w, int dim = -1) const {
    const Type& t = f_.type(m);
    if (t.is_scalar()) return true;
    const Op* op = f_.def(m);
    if (!op) return false;
    const size_t last = dim < 0 ? t.shape.size() - 1 : static_cast<size_t>(dim);
    switch (op->kind) {
      case OpKind::Constant:
      case OpKind::Splat:
        return true;
      case OpKind::Broadcast: {
        const Type& st = f_.type(op->operands[0]);
        if (st.shape.size() != t.shape.size()) return false;
        return st.shape[last] == 1 || lanes_agree(op->operands[0], w, dim);
      }
      case OpKind::Binary: {
        const auto k = static_cast<ir::BinaryKind>(op->sub);
        if (k != ir::BinaryKind::And && k != ir::BinaryKind::Or) return false;
        return lanes_agree(op->operands[0], w, dim) && lanes_agree(op->operands[1], w, dim);
      }
      case OpKind::Compare: {
        const ir::AffineForm* a = affine_.loose_form(op->operands[0]);
        const ir::AffineForm* b = affine_.loose_form(op->operands[1]);
        if (!a || !b || a->coef.size() != t.shape.size() || b->coef.size() != t.shape.size() ||
            !a->coef_known(last) || !b->coef_known(last))
          return false;
        const int64_t slope = a->coef[last] - b->coef[last];
        if (slope == 0) return true;  // a - b is constant along the run
        // a - b = D + slope * i: with D and the other dimensions' terms multiples of w, `<` and
        // `>=` (slope 1) or `>` and `<=` (slope -1) change only at a multiple of w.
        const auto k = static_cast<ir::CmpKind>(op->sub);
        const bool aligned_change =
            (slope == 1 && (k == ir::CmpKind::LT || k == ir::CmpKind::GE)) ||
            (slope == -1 && (k == ir::CmpKind::GT || k == ir::CmpKind::LE));
        if (!aligned_change || a->divisibility % w != 0 || b->divisibility % w != 0) return false;
        for (size_t d = 0; d < t.shape.size(); ++d) {
          if (d == last) continue;
          if (a->coef_known(d) && b->coef_known(d)
                  ? (a->coef[d] - b->coef[d]) % w != 0
                  : a->coef_divisibility(d) % w != 0 || b->coef_divisibility(d) % w != 0)
            return false;
        }
        return true;
      }
      default:
        return false;
    }
  }

  // An unrolled loop over the runs of `shape` (see above): `body(run, idx)` with the run's number
  // (an expression) and its first element's index variables.
  // `blocked`: runs of that many elements in the blocked order whatever the shape's layout (for a
  // loop that reads no register array of the shape); with `axis` 0 (a 2-D shape), the runs lie
  // down its columns instead (the blocked order of the transposed shape).
  void runs(const SmallVector<int64_t, 4>& shape,
            const std::function<void(const std::string&, const Index&)>& body, int64_t blocked = 0,
            int axis = -1) {
    const int64_t n = numel(shape);
    const int64_t vec = blocked ? blocked : vec_of(shape);
    const MmaLayout* slice = blocked ? nullptr : slice_of(shape);
    const int64_t count = slice ? per_thread(shape) : (n + vec * threads_ - 1) / (vec * threads_);
    const std::string g = fresh("_g"), e = fresh("_e");
    line("#pragma unroll");
    line("for (int32_t " + g + " = 0; " + g + " < " + std::to_string(count) + "; ++" + g + ") {");
    ++indent_;
    const MmaLayout* m = blocked || slice ? nullptr : mma_layout(shape);
    const bool mma0 = runs_mma_;
    runs_mma_ = m != nullptr;  // (at_run_element: the elements are in the Mma layout)
    if (slice) {               // one row per run
      const std::string r = fresh("_i");
      line("const int32_t " + r + " = " + slice_row(*slice, g) + ";");
      body(g, {r});
    } else if (m) {
      body(g, mma_index(*m, g, "0"));
    } else {
      line("const int32_t " + e + " = (" + g + " * " + std::to_string(threads_) + " + _tid) * " +
           std::to_string(vec) + ";");
      if (n % (threads_ * vec) != 0) line("if (" + e + " >= " + std::to_string(n) + ") break;");
      if (axis == 0 && blocked && shape.size() == 2) {
        const Index t = decode({shape[1], shape[0]}, e);
        body(g, {t[1], t[0]});
      } else {
        body(g, decode(shape, e));
      }
    }
    runs_mma_ = mma0;
    --indent_;
    line("}");
  }
  // Element j of the run starting at `idx` (runs lie along the last dimension, or `axis`).
  static Index run_element(const Index& idx, int64_t j, int axis = -1) {
    Index r = idx;
    std::string& i = axis < 0 ? r.back() : r[static_cast<size_t>(axis)];
    if (j) i = "(" + i + " + " + std::to_string(j) + ")";
    return r;
  }
  // Generates `f(idx_j)` with element j of the run as the current element (register arrays read
  // there give slot `run * V + j`).
  std::string at_run_element(const SmallVector<int64_t, 4>& shape, const std::string& run,
                             const Index& idx, int64_t j,
                             const std::function<std::string(const Index&)>& f, int axis = -1) {
    const std::string slot =
        "(" + run + " * " + std::to_string(vec_of(shape)) + " + " + std::to_string(j) + ")";
    elem_loops_.push_back({shape, run_element(idx, j, axis), slot, runs_mma_ && axis < 0});
    std::string r = f(elem_loops_.back().idx);
    elem_loops_.pop_back();
    return r;
  }

  // The condition that load `op`'s lanes [c, c + w) of a run all hold their masks ("" for an
  // unmasked load; with `agree`, the first lane's mask stands for all).
  std::string run_mask(const Op& op, const SmallVector<int64_t, 4>& shape, const std::string& run,
                       const Index& idx, int64_t c, int64_t w, bool agree, int axis = -1) {
    std::string all;
    if (op.operands.size() < 2) return all;
    for (int64_t j = c; j < (agree ? c + 1 : c + w); ++j) {
      all += (all.empty() ? "" : " && ") +
             at_run_element(
                 shape, run, idx, j,
                 [&](const Index& i) { return "(" + expr(op.operands[1], i) + ")"; }, axis);
    }
    return all;
  }

  // A masked vector load between its two passes: its op, array and width, and the raw vectors
  // and run masks its first pass wrote (`per_run` accesses per run).
  struct RawRuns {
    std::string data, ok;
    int64_t per_run = 0;
    std::string at(const std::string& run, int64_t k) const { return data + slot(run, k); }
    std::string ok_at(const std::string& run, int64_t k) const { return ok + slot(run, k); }
    std::string slot(const std::string& run, int64_t k) const {
      return "[" + run + " * " + std::to_string(per_run) + " + " + std::to_string(k) + "]";
    }
  };
  struct PendingLoad {
    const Op* op;
    ValueId v;
    int64_t w;
    RawRuns raw;
  };

  // A load into register array `v`, `w` lanes per access: one vector load when the lanes' masks
  // all hold, else each lane's own masked load. A masked load takes two passes over the runs: the
  // first issues every run's vector load (a predicated load, no branch, no use of the value), the
  // second converts the values and loads the partly masked runs lane by lane. In one pass each
  // run's conversion waited for its load before the next run's load was issued: a column
  // reduction's eight rows in flight were eight memory latencies one after another.
  void vector_load(const Op& op, ValueId v, int64_t w) {
    const Type& t = f_.type(v);
    const bool read0 = read_shared_;
    read_shared_ = false;
    PendingLoad load{&op, v, w, {}};
    if (op.operands.size() > 1) {  // masked: the first pass
      const int64_t vec = vec_of(t.shape);
      const std::string vt = vec_type(t.elem, w);
      const bool agree = lanes_agree(op.operands[1], w);
      const int64_t count = per_thread(t.shape) / vec;  // runs per thread
      load.raw = {fresh("_vr"), fresh("_vk"), (vec + w - 1) / w};
      line(vt + " " + load.raw.data + "[" + std::to_string(count * load.raw.per_run) + "];");
      line("bool " + load.raw.ok + "[" + std::to_string(count * load.raw.per_run) + "];");
      runs(t.shape, [&](const std::string& run, const Index& idx) {
        for (int64_t c = 0; c < vec; c += w) {
          const std::string all = run_mask(op, t.shape, run, idx, c, w, agree);
          const std::string ptr = at_run_element(
              t.shape, run, idx, c, [&](const Index& i) { return expr(op.operands[0], i); });
          const std::string ok = load.raw.ok_at(run, c / w);
          line(ok + " = " + (all.empty() ? std::string("true") : all) + ";");
          line("if (" + ok + ") " + load.raw.at(run, c / w) + " = *(const " + vt + "*)(" + ptr +
               ");");
        }
      });
      // The second pass waits until something reads `v` (or writes memory, or leaves the
      // region): the loads of consecutive load ops are then all in flight together. Not from
      // inside a versioned access's block, nor after addresses read from shared memory (then a
      // barrier).
      if (branched_ == 0 && !read_shared_) {
        read_shared_ = read0;
        pending_.push_back(load);
        return;
      }
    }
    finish_load(load);
    if (read_shared_) line("__syncthreads();");
    read_shared_ = read_shared_ || read0;
  }

  // The second pass of vector_load: the loaded runs converted into the register array, partly
  // masked runs loaded lane by lane (an unmasked load is this pass alone, its runs loaded here).
  void finish_load(const PendingLoad& load) {
    const Op& op = *load.op;
    const ValueId v = load.v;
    const int64_t w = load.w;
    const Type& t = f_.type(v);
    const int64_t vec = vec_of(t.shape);
    const bool masked = op.operands.size() > 1;
    const bool agree = masked && lanes_agree(op.operands[1], w);
    const bool pack = packed(v);
    const std::string vt = vec_type(t.elem, w);
    const auto convert = [&](const std::string& run, const std::string& tmp, int64_t c,
                             const std::string& pad) {
      for (int64_t j = c; j < c + w; j += pack ? 2 : 1) {
        const std::string slot = run + " * " + std::to_string(vec) + " + " + std::to_string(j);
        if (pack) {  // the loaded bits as they are, a pair per word
          line(pad + name(v) + "[(" + slot + ") >> 1] = ((const uint32_t*)&" + tmp + ")[" +
               std::to_string((j - c) / 2) + "];");
          continue;
        }
        line(pad + name(v) + "[" + slot +
             "] = " + load_conv(t.elem, tmp + ".v[" + std::to_string(j - c) + "]") + ";");
      }
    };
    runs(t.shape, [&](const std::string& run, const Index& idx) {
      for (int64_t c = 0; c < vec; c += w) {
        if (!masked) {
          const std::string ptr = at_run_element(
              t.shape, run, idx, c, [&](const Index& i) { return expr(op.operands[0], i); });
          const std::string tmp = fresh("_vt");
          line("const " + vt + " " + tmp + " = *(const " + vt + "*)(" + ptr + ");");
          convert(run, tmp, c, "");
          continue;
        }
        line("if (" + load.raw.ok_at(run, c / w) + ") {");
        convert(run, load.raw.at(run, c / w), c, "  ");
        line("} else {");
        if (pack) {  // every lane masked off (the masks agree): `other`'s bits in each half
          for (int64_t j = c; j < c + w; j += 2) {
            std::string half[2];
            for (int64_t h = 0; h < 2; ++h) {
              half[h] = at_run_element(t.shape, run, idx, j + h, [&](const Index& i) {
                return "(uint32_t)" + store_conv(t.elem, op.operands.size() > 2
                                                             ? expr(op.operands[2], i)
                                                             : std::string("0.0f"));
              });
            }
            line("  " + name(v) + "[(" + run + " * " + std::to_string(vec) + " + " +
                 std::to_string(j) + ") >> 1] = " + half[0] + " | (" + half[1] + " << 16);");
          }
          line("}");
          continue;
        }
        for (int64_t j = c; j < c + w; ++j) {
          // The run's lanes are all masked off (agree: `other`), or some (each lane's own load).
          line("  " + at_run_element(t.shape, run, idx, j, [&](const Index& i) {
                 const std::string value = !agree                   ? op_expr(op, i)
                                           : op.operands.size() > 2 ? expr(op.operands[2], i)
                                                                    : std::string("0");
                 return element_of(v, name(v), i) + " = " + value + ";";
               }));
        }
        line("}");
      }
    });
  }

  // Emits the second passes of the loads waiting for them (vector_load), in order.
  void flush_loads() {
    if (pending_.empty()) return;
    const bool read0 = read_shared_;
    read_shared_ = false;
    std::vector<PendingLoad> todo;
    todo.swap(pending_);
    for (const PendingLoad& l : todo) finish_load(l);
    if (read_shared_) line("__syncthreads();");
    read_shared_ = read_shared_ || read0;
  }
  // Whether `v` is a waiting load's array or an inline expression reading one.
  bool reads_pending(ValueId v, int depth = 0) const {
    for (const PendingLoad& l : pending_) {
      if (l.v == v) return true;
    }
    if (depth > 64) return true;  // a deep expression: assume it does
    if (storage(v) != Storage::Inline) return false;
    const Op* d = f_.def(v);
    if (!d) return false;
    for (ValueId o : d->operands) {
      if (reads_pending(o, depth + 1)) return true;
    }
    return false;
  }
  // Whether `op` may be emitted while loads wait for their second pass: another load or an
  // elementwise computation into scalars, inline values or registers, none reading a waiting load.
  bool may_pass_loads(const Op& op) const {
    switch (op.kind) {
      case OpKind::Load:
        break;
      case OpKind::Constant:
      case OpKind::ProgramId:
      case OpKind::NumPrograms:
      case OpKind::Arange:
      case OpKind::Splat:
      case OpKind::Broadcast:
      case OpKind::ExpandDims:
      case OpKind::Binary:
      case OpKind::Compare:
      case OpKind::Unary:
      case OpKind::Cast:
      case OpKind::Select:
      case OpKind::AddPtr:
      case OpKind::Fma: {
        bool all_inline = true;
        for (ValueId r : op.results) {
          // (A shared-memory array may take the place of one a waiting load's masks read.)
          const Storage st = storage(r);
          if (st != Storage::Scalar && st != Storage::Inline && !in_registers(r)) return false;
          all_inline = all_inline && st == Storage::Inline;
        }
        if (all_inline) return true;  // nothing emitted here: its readers flush when they need it
        break;
      }
      default:
        return false;
    }
    for (ValueId o : op.operands) {
      if (reads_pending(o)) return false;
    }
    return true;
  }

  // A store, `w` lanes per access: the lanes' values first, then one vector store when their
  // masks all hold, else each lane's own masked store.
  void vector_store(const Op& op, int64_t w) {
    const Type& pt = f_.type(op.operands[0]);
    const int64_t vec = vec_of(pt.shape);
    const std::string vt = vec_type(pt.elem, w);
    const bool masked = op.operands.size() > 2;
    const bool agree = masked && lanes_agree(op.operands[2], w);
    runs(pt.shape, [&](const std::string& run, const Index& idx) {
      for (int64_t c = 0; c < vec; c += w) {
        const std::string tmp = fresh("_sv");
        line(vt + " " + tmp + ";");
        std::string all;
        std::vector<std::string> masks, ptrs;
        for (int64_t j = c; j < c + w; ++j) {
          at_run_element(pt.shape, run, idx, j, [&](const Index& i) {
            line(tmp + ".v[" + std::to_string(j - c) +
                 "] = " + store_conv(pt.elem, expr(op.operands[1], i)) + ";");
            if (masked) masks.push_back("(" + expr(op.operands[2], i) + ")");
            ptrs.push_back(expr(op.operands[0], i));
            return std::string();
          });
          if (masked && (!agree || j == c)) all += (all.empty() ? "" : " && ") + masks.back();
        }
        if (!masked) {
          line("*(" + vt + "*)(" + ptrs[0] + ") = " + tmp + ";");
          continue;
        }
        line("if (" + all + ") {");
        line("  *(" + vt + "*)(" + ptrs[0] + ") = " + tmp + ";");
        if (agree) {  // else the run is all masked off
          line("}");
          continue;
        }
        line("} else {");
        for (int64_t j = 0; j < w; ++j) {
          line("  if (" + masks[static_cast<size_t>(j)] + ") *" + ptrs[static_cast<size_t>(j)] +
               " = " + tmp + ".v[" + std::to_string(j) + "];");
        }
        line("}");
      }
    });
    line("__syncthreads();");
  }

  void plan_vectors(const Region& r) {
    for (const Op* op : r.ops) {
      for (const Region& sub : op->regions) plan_vectors(sub);
      if (op->kind != OpKind::Load && op->kind != OpKind::Store) continue;
      const auto& shape = f_.type(op->operands[0]).shape;
      int64_t w = widest_access(op->operands[0]);
      std::vector<const Op*> rems;
      if (rems_to_version(op->operands[0], rems))
        w = std::max(w, widest_access(op->operands[0], &affine_rem_));
      while (w > 1 && w * threads_ > numel(shape)) w /= 2;  // every thread keeps a run
      if (w == 1) continue;
      auto it =
          std::find_if(vec_.begin(), vec_.end(), [&](const auto& e) { return e.first == shape; });
      if (it == vec_.end()) {
        vec_.emplace_back(shape, w);
      } else {
        it->second = std::max(it->second, w);
      }
    }
  }

  // A block-wide reduction of a whole tile (one output, an axis wider than a warp): it folds the
  // tile in the element loop's order, so it reads register arrays in place (reduce()).
  bool block_reduction(const Op& op) const {
    if (op.kind != OpKind::Reduce) return false;
    const auto k = static_cast<ir::ReduceKind>(op.sub);
    if (k == ir::ReduceKind::ArgMax || k == ir::ReduceKind::ArgMin) return false;
    const Type& it = f_.type(op.operands[0]);
    return it.numel() == it.shape[static_cast<size_t>(op.ival)] && it.numel() > 32;
  }

  // A reduction along the rows of a tile in the Mma layout (attention's max and sum of scores):
  // each thread folds the elements it holds, then the lanes of each row's quad and the warps
  // across the columns combine (mma_row_reduce), so the tile is read at its own elements.
  bool mma_row_reduction(const Op& op) const {
    if (op.kind != OpKind::Reduce || checked_) return false;
    const auto k = static_cast<ir::ReduceKind>(op.sub);
    if (k == ir::ReduceKind::ArgMax || k == ir::ReduceKind::ArgMin) return false;
    const Type& it = f_.type(op.operands[0]);
    return it.shape.size() == 2 && op.ival == 1 && mma_layout(it.shape) != nullptr &&
           !f_.type(op.result()).is_scalar();
  }

  // Whether every read of `v` is at the reading thread's own element of `v`'s shape.
  bool same_element(ValueId v) {
    int8_t& memo = same_elem_memo_[static_cast<size_t>(v)];
    if (memo >= 0) return memo != 0;
    memo = 0;  // a cycle (none in SSA) reads as no
    const auto& shape = f_.type(v).shape;
    if (shape.empty()) return false;
    for (const ir::Use& u : uses_.uses(v)) {
      const Op& o = *u.user;
      switch (o.kind) {
        case OpKind::Yield:  // assigned to a loop-carried value or an if's result of its shape
        case OpKind::For:    // (a tile is never a bound or a condition)
        case OpKind::While:
        case OpKind::If:
          continue;
        case OpKind::Store:
          if (f_.type(o.operands[0]).shape != shape) return false;
          continue;
        case OpKind::Reduce:
          if (!block_reduction(o) && !mma_row_reduction(o)) return false;
          continue;
        case OpKind::ExpandDims:  // a row-slice vector's `[:, None]` (plan_slices checked it)
          if (!slice_of(shape)) return false;
          continue;
        case OpKind::Dot:  // the accumulator, read at each result element (dot())
          if (o.operands[0] == v || o.operands[1] == v) {
            // An operand that operand_tile converts into its tile element by element (not a
            // load it copies) is read by the loops of its shape: at its own elements where the
            // shape has the Mma layout (attention's p, the scores' shape, as p @ v's A).
            const Op* d = f_.def(v);
            if (!mma_in_registers(o) || !mma_layout(shape) || o.operands[0] == o.operands[1] ||
                (d && d->kind == OpKind::Load))
              return false;
          }
          continue;
        default:
          break;
      }
      if (!ir::traits(o.kind).has(ir::kElementwise) || f_.type(o.result()).shape != shape)
        return false;
      const Storage s = plan_.storage(o.result());
      if (s == Storage::Inline ? !same_element(o.result()) : s != Storage::Array) return false;
    }
    memo = 1;
    return true;
  }

  // Registers of one thread for `v`'s array (4-byte words).
  int64_t register_words(ValueId v) const {
    const Type& t = f_.type(v);
    return per_thread(t.shape) * std::max<int64_t>(1, element_bytes(t) / 4);
  }
  bool take_registers(std::initializer_list<ValueId> vs, bool free = false) {
    for (ValueId v : vs) {
      if (f_.type(v).is_scalar() || !same_element(v)) return false;
    }
    const int64_t words = free ? 0 : register_words(*vs.begin());  // the values share one array
    if (words > 0 && mma_.empty()) {
      // Without tensor-core tiles (memory-bound kernels) every array counts for the whole kernel,
      // the accounting their measured occupancy comes from (by live ranges, tutorial 05's layer
      // norm forward took 192 registers instead of 96; not measured on a GPU yet).
      if (total_words_ + words > register_budget()) return false;
      total_words_ += words;
    } else if (words > 0) {
      int lo = std::numeric_limits<int>::max(), hi = -1;
      for (ValueId v : vs) {
        const auto [from, to] = live_range(v);
        lo = std::min(lo, from);
        hi = std::max(hi, to);
      }
      int64_t peak = 0;
      for (int p = lo; p <= hi; ++p) peak = std::max(peak, live_words_[static_cast<size_t>(p)]);
      if (peak + words > register_budget()) return false;
      for (int p = lo; p <= hi; ++p) live_words_[static_cast<size_t>(p)] += words;
    }
    for (ValueId v : vs) reg_[static_cast<size_t>(v)] = 1;
    return true;
  }

  // Program positions for the register budget, which counts the arrays live at once: each op
  // has a first and a last position, its regions' ops between them.
  void number_ops(const Region& r) {
    for (const Op* op : r.ops) {
      const int first = positions_++;
      parent_[op] = &r;
      for (const Region& sub : op->regions) {
        owner_[&sub] = op;
        number_ops(sub);
      }
      span_[op] = {first, positions_++};
    }
  }
  // The positions where `v`'s array is live: from its definition (a region argument's: its
  // loop's start) to its last use, where a use in a loop that `v` is defined outside of (and a
  // loop's own carried value) lasts to the loop's end.
  std::pair<int, int> live_range(ValueId v) const {
    const Region* home = uses_.def_region(v);
    const Op* d = f_.def(v);
    const auto owner = home ? owner_.find(home) : owner_.end();
    int from = 0;
    if (d) {
      from = span_.at(d).first;
    } else if (owner != owner_.end()) {
      from = span_.at(owner->second).first;
    }
    int to = from;
    if (!d && owner != owner_.end()) to = span_.at(owner->second).second;  // carried
    for (const ir::Use& u : uses_.uses(v)) {
      int at = span_.at(u.user).first;
      for (const Region* r = u.region; r && r != home;) {
        const auto it = owner_.find(r);
        if (it == owner_.end()) break;
        const Op* o = it->second;
        if (o->kind == OpKind::For || o->kind == OpKind::While)
          at = std::max(at, span_.at(o).second);
        r = parent_.at(o);
      }
      to = std::max(to, at);
    }
    return {from, to};
  }

  // Whether every use of `v` is a yield (to a loop-carried value, or an if's result).
  bool only_yielded(ValueId v) const {
    for (const ir::Use& u : uses_.uses(v)) {
      if (u.user->kind != OpKind::Yield) return false;
    }
    return true;
  }
  // Whether dot `op` runs on tensor cores with its accumulator in registers (mma_tile): its
  // result shape has the Mma layout.
  bool mma_in_registers(const Op& op) const {
    return mma_dot_types(op) && mma_layout(f_.type(op.result()).shape) != nullptr;
  }

  // Chooses the register arrays within register_budget() words per thread live at once: first
  // the loops' (their carried values, then their bodies' arrays, in program order), then the
  // rest in program order.
  // The loops are where an array is read again and again (an attention loop's accumulator, its
  // scores and row vectors); a tile outside every loop (a loop-invariant operand on its way to
  // shared memory, an epilogue's bias) is read once.
  void plan_registers(const Region& r, int depth = 0, bool loops = true) {
    for (const Op* op : r.ops) {
      const bool loop = op->kind == OpKind::For || op->kind == OpKind::While;
      if (loop && loops) {
        if (op->kind == OpKind::For) {
          for (size_t k = 0; k < op->results.size(); ++k)
            take_registers({op->regions[0].args[1 + k], op->results[k]});
        } else {
          for (size_t k = 0; k < op->results.size(); ++k)
            take_registers({op->regions[1].args[k], op->regions[0].args[k], op->results[k]});
        }
      }
      for (const Region& sub : op->regions) plan_registers(sub, depth + (loop ? 1 : 0), loops);
      if (loop || (depth > 0) != loops) continue;
      switch (op->kind) {
        case OpKind::If:
          for (ValueId v : op->results) take_registers({v});
          continue;
        case OpKind::Dot:
          // On tensor cores the accumulator is the result's registers (mma_tile); a result that
          // only goes on to a loop's carried value shares that value's registers (the copy
          // between them is renamed away), so it costs nothing more.
          if (mma_in_registers(*op)) take_registers({op->result()}, only_yielded(op->result()));
          continue;
        case OpKind::Reduce:  // a row reduction into the row-slice layout: its registers
          if (mma_row_reduction(*op) && slice_of(f_.type(op->result()).shape))
            take_registers({op->result()});
          continue;
        case OpKind::Atomic:
        case OpKind::AtomicCas:
        case OpKind::ReduceFn:
        case OpKind::ScanFn:
          continue;  // their results are written by their own loops
        default:
          break;
      }
      for (ValueId v : op->results) {
        const Storage s = plan_.storage(v);
        if (s == Storage::Array || (s == Storage::Inline && op->kind == OpKind::Load))
          take_registers({v});
      }
    }
  }

  std::string array_ref(ValueId v, const Index& idx) override {
    if (!in_registers(v)) {
      read_shared_ = true;
      return ExprPrinter::array_ref(v, idx);
    }
    if (packed(v)) {  // slot s is the low (even s) or high half of word s / 2
      const std::string s = register_slot(name(v), f_.type(v).shape, idx);
      const std::string word = name(v) + "[(" + s + ") >> 1]";
      if (f_.type(v).elem == DType::BFloat16)
        return "trt::u2f(((" + s + ") & 1) ? (" + word + " & 0xffff0000u) : (" + word + " << 16))";
      return "trt::half_to_float((uint16_t)(" + word + " >> (((" + s + ") & 1) * 16)))";
    }
    return register_ref(name(v), f_.type(v).shape, idx);
  }
  // The slot of element `idx` in a register array of `shape`: only the innermost element loop's
  // own element.
  std::string register_slot(const std::string& arr, const SmallVector<int64_t, 4>& shape,
                            const Index& idx) {
    // A row-slice array read in a loop over an Mma tile of its rows (a broadcast `m[:, None]`):
    // the slot of the loop's row.
    if (slice_of(shape) && !elem_loops_.empty() && idx.size() == 1) {
      const ElementLoop& l = elem_loops_.back();
      const MmaLayout* m = l.mma && l.shape.size() == 2 ? mma_layout(l.shape) : nullptr;
      if (m && l.shape[0] == shape[0] && l.idx[0] == idx[0]) {
        touched_registers_ = true;
        return slice_slot_of_run(*m, "(" + l.slot + ") >> 1");
      }
    }
    TS_INTERNAL_ASSERT(!elem_loops_.empty() && elem_loops_.back().shape == shape &&
                       elem_loops_.back().idx == idx)
        << "[kernel " << f_.name << "] register array " << arr
        << " read at an element its thread does not hold";
    touched_registers_ = true;
    return elem_loops_.back().slot;
  }
  std::string register_ref(const std::string& arr, const SmallVector<int64_t, 4>& shape,
                           const Index& idx) {
    return arr + "[" + register_slot(arr, shape, idx) + "]";
  }
  // Where an element of array `v` (or of a temporary `arr` shaped and placed like it) is written.
  std::string element_of(ValueId v, const std::string& arr, const Index& idx) {
    TS_INTERNAL_ASSERT(!packed(v))
        << "[kernel " << f_.name << "] a packed array written by element";
    if (in_registers(v)) return register_ref(arr, f_.type(v).shape, idx);
    return arr + "[" + flat(f_.type(v).shape, idx) + "]";
  }
  void declare_registers(const std::string& var, const Type& t) {
    line(type_str(t) + " " + var + "[" + std::to_string(per_thread(t.shape)) + "];");
  }

  // ---- shared memory ----------------------------------------------------------------------------

  // Room for `count` values of type `t` at a fixed offset; declares `var` pointing there.
  void smem_array(const std::string& var, const Type& t, int64_t count) {
    const std::string ty = type_str(t);
    smem_ = (smem_ + 15) / 16 * 16;
    line(ty + "* const " + var + " = (" + ty + "*)(_smem + " + std::to_string(smem_) + ");");
    smem_ += count * element_bytes(t);
  }
  // The registers of this thread's part of register array `v`.
  int64_t regs_of(ValueId v) const { return per_thread(f_.type(v).shape); }
  void declare_array(ValueId v) {
    const Type& t = f_.type(v);
    if (packed(v)) {
      line("uint32_t " + name(v) + "[" + std::to_string(per_thread(t.shape) / 2) + "];");
      return;
    }
    if (in_registers(v)) return declare_registers(name(v), t);
    smem_array(name(v), t, t.numel());
  }
  // A scalar result computed by one thread (or a warp) for all: a shared slot, read back by every
  // thread after the barrier (publish).
  std::string scalar_slot(ValueId v) {
    const std::string s = name(v) + "_s";
    smem_array(s, f_.type(v), 1);
    return s;
  }
  void publish(ValueId v) {
    line(type_str(f_.type(v)) + " const " + name(v) + " = " + name(v) + "_s[0];");
    // In a loop the slot is written again in the next iteration: every thread reads it first (a
    // thread racing ahead would otherwise overwrite it, and threads could leave a spin loop
    // apart and meet different barriers).
    if (loop_depth_ > 0) line("__syncthreads();");
  }

  // ---- loops over a tile's elements -------------------------------------------------------------

  // What a loop over elements writes: shared memory or global memory (a barrier follows it), or
  // registers only (a barrier follows only if it read shared memory).
  enum class Writes { Memory, Registers };

  // The block's threads share the elements of `shape` (a rank-0 shape is thread 0's). A loop that
  // touches register arrays is unrolled, so that their indices are constants, and gives each
  // thread its runs of the shape (vector accesses); another takes t, t + T, ... in thread t.
  void loops(const SmallVector<int64_t, 4>& shape, const std::function<void(const Index&)>& body,
             Writes writes = Writes::Memory) {
    if (shape.empty()) {
      line("if (_tid == 0) {");
      ++indent_;
      body({});
      --indent_;
      line("}");
      line("__syncthreads();");
      return;
    }
    const int64_t n = numel(shape);
    const std::string e = fresh("_e"), k = fresh("_k");
    const std::string ns = std::to_string(n), ts = std::to_string(threads_);
    // The body first, into a buffer: whether it touched registers decides the loop's form.
    std::ostringstream outer;
    std::swap(out_, outer);
    const bool touched0 = touched_registers_, read0 = read_shared_;
    touched_registers_ = read_shared_ = false;
    ++indent_;
    const MmaLayout* slice = slice_of(shape);
    const MmaLayout* mma = slice ? slice : mma_layout(shape);
    elem_loops_.push_back({shape, {}, k, mma != nullptr && slice == nullptr});
    if (slice) {
      const std::string r = fresh("_i");
      line("const int32_t " + r + " = " + slice_row(*slice, k) + ";");
      elem_loops_.back().idx = {r};
    } else {
      elem_loops_.back().idx =
          mma ? mma_index(*mma, k + " >> 1", "(" + k + " & 1)") : decode(shape, e);
    }
    body(elem_loops_.back().idx);
    elem_loops_.pop_back();
    --indent_;
    const std::string text = out_.str();
    std::swap(out_, outer);
    // (A loop over an Mma-layout shape is always unrolled: its index comes from the slot.)
    const bool unroll = touched_registers_ || writes == Writes::Registers || mma;
    const bool barrier = writes == Writes::Memory || read_shared_;
    touched_registers_ = touched_registers_ || touched0;
    read_shared_ = read_shared_ || read0;
    if (unroll) {
      // Slot k is element k % V of the thread's (k / V)-th run; elements grow with k.
      const int64_t vec = vec_of(shape);
      line("#pragma unroll");
      line("for (int32_t " + k + " = 0; " + k + " < " + std::to_string(per_thread(shape)) + "; ++" +
           k + ") {");
      if (mma) {
        // the slot's index is computed in the body
      } else if (vec == 1) {
        line("  const int32_t " + e + " = " + k + " * " + ts + " + _tid;");
      } else {
        const std::string vs = std::to_string(vec);
        line("  const int32_t " + e + " = (" + k + " / " + vs + " * " + ts + " + _tid) * " + vs +
             " + " + k + " % " + vs + ";");
      }
      if (!mma && n % (threads_ * vec) != 0) line("  if (" + e + " >= " + ns + ") break;");
    } else {
      line("for (int32_t " + e + " = _tid; " + e + " < " + ns + "; " + e + " += " + ts + ") {");
    }
    out_ << text;
    line("}");
    if (barrier) line("__syncthreads();");
  }

  // Index variables for the row-major flat index `e` of `shape`.
  Index decode(const SmallVector<int64_t, 4>& shape, const std::string& e) {
    Index idx;
    int64_t stride = 1;
    for (int64_t s : shape) stride *= s;
    for (size_t d = 0; d < shape.size(); ++d) {
      stride /= shape[d];
      if (shape[d] == 1) {
        idx.push_back("0");
        continue;
      }
      const std::string i = fresh("_i");
      std::string v = stride == 1 ? e : "(" + e + " / " + std::to_string(stride) + ")";
      if (d > 0) v = "(" + v + " % " + std::to_string(shape[d]) + ")";
      line("const int32_t " + i + " = " + v + ";");
      idx.push_back(i);
    }
    return idx;
  }

  // ---- statements -------------------------------------------------------------------------------

  void region(const Region& r) {
    const Region* outer = region_;
    region_ = &r;
    for (const Op* op : r.ops) {
      if (!pending_.empty() && !may_pass_loads(*op)) flush_loads();
      this->op(*op);
      hoist_operand(*op);
    }
    flush_loads();
    region_ = outer;
  }

  void op(const Op& op) {
    switch (op.kind) {
      case OpKind::Yield:
        return;
      case OpKind::Store:
        return store(op);
      case OpKind::For:
        return for_op(op);
      case OpKind::If:
        return if_op(op);
      case OpKind::While:
        return while_op(op);
      case OpKind::Reduce:
        return reduce(op);
      case OpKind::Dot:
        return dot(op);
      case OpKind::Atomic:
      case OpKind::AtomicCas:
        return atomic(op);
      case OpKind::ReduceFn:
      case OpKind::ScanFn:
        return reduce_fn(op);
      case OpKind::Assert:
        if (checked_) {
          loops(f_.type(op.operands[0]).shape,
                [&](const Index& idx) { line(assert_stmt(op, idx)); });
        }
        return;  // device_assert is checked in the debug mode only, as Triton's
      case OpKind::Print:
        return print(op);
      default:
        break;
    }
    if (&op == defer_mul_) {
      // The carried accumulator times x, in place, once the products the previous iteration
      // left in flight into it are done (fenced: no read of it moves above the wait).
      const ValueId c = defer_acc_;
      line("trt::wgmma_wait<0>();");
      line("trt::wgmma_fence_operands<" + std::to_string(regs_of(c)) + ">(" + name(c) + ");");
      loops(
          f_.type(c).shape,
          [&](const Index& idx) {
            line(element_of(c, name(c), idx) + " = " + op_expr(op, idx) + ";");
          },
          Writes::Registers);
      return;  // (its one reader, the deferred dot, accumulates into c itself)
    }
    if (op.kind == OpKind::Load && mma_operand_[static_cast<size_t>(op.result())] &&
        nested_mma_operand(op)) {
      // Only a tensor-core dot in a nested region (a loop) reads it: copied into its tile
      // once, here, not in every iteration (hoist_operand).
      return;
    }
    for (ValueId v : op.results) {
      const Storage s = storage(v);
      if (s == Storage::Scalar) {
        line(type_str(f_.type(v)) + " const " + name(v) + " = " + op_expr(op, {}) + ";");
      } else if (s == Storage::Array) {
        declare_array(v);
        auto gen = [&] {
          if (op.kind == OpKind::Load && in_registers(v)) {
            if (const int64_t w = access_width(op); w > 1) return vector_load(op, v, w);
          }
          loops(
              f_.type(v).shape,
              [&](const Index& idx) {
                const std::string value = op_expr(op, idx);
                line(element_of(v, name(v), idx) + " = " + value + ";");
              },
              in_registers(v) ? Writes::Registers : Writes::Memory);
        };
        if (op.kind == OpKind::Load) {
          versioned_access(op, gen);
        } else {
          gen();
        }
      }
    }
  }

  void store(const Op& op) {
    versioned_access(op, [&] {
      const Type& pt = f_.type(op.operands[0]);
      if (const int64_t w = access_width(op); w > 1) return vector_store(op, w);
      if (slice_of(pt.shape)) {  // the row-slice layout: each row by its quad's first lane
        loops(pt.shape, [&](const Index& idx) {
          line("if ((_tid & 3) == 0) {");
          line("  " + store_stmt(op, idx));
          line("}");
        });
        return;
      }
      loops(pt.shape, [&](const Index& idx) { line(store_stmt(op, idx)); });
    });
  }

  // A dot operand as shared memory (stored tiles are used in place; an inline one is computed
  // into a temporary first, so each element is loaded once, not once per output).
  std::string dot_operand(ValueId v) {
    if (storage(v) == Storage::Array && !in_registers(v)) return name(v);
    const Type& t = f_.type(v);
    const std::string tmp = fresh("_op");
    smem_array(tmp, t, t.numel());
    loops(t.shape, [&](const Index& idx) {
      line(tmp + "[" + flat(t.shape, idx) + "] = " + expr(v, idx) + ";");
    });
    return tmp;
  }

  // Whether some register array has shape `shape`.
  bool shape_in_registers(const SmallVector<int64_t, 4>& shape) const {
    for (size_t v = 0; v < reg_.size(); ++v) {
      if (reg_[v] && f_.type(static_cast<ValueId>(v)).shape == shape) return true;
    }
    return false;
  }

  // A tensor-core dot operand as a tile in shared memory laid out as `tile` says, 16-bit values
  // for trt::mma_tile and wgmma_tile or float32 for trt::mma_tile_tf32: a load used only here is
  // copied from global memory by runs, bits unchanged (copy_operand); any other value is
  // converted element by element.
  std::string operand_tile(ValueId v, const OperandTile& tile) {
    if (auto it = staged_.find(v); it != staged_.end()) return it->second;
    const Type& t = f_.type(v);
    const std::string tmp = fresh("_op");
    const std::string ct = storage_type(t.elem);  // uint16_t, or float for tf32
    smem_ = (smem_ + tile.align() - 1) / tile.align() * tile.align();
    line(ct + "* const " + tmp + " = (" + ct + "*)(_smem + " + std::to_string(smem_) + ");");
    smem_ += tile.elems() * static_cast<int64_t>(itemsize(t.elem));
    const Op* def = f_.def(v);
    if (def && def->kind == OpKind::Load && storage(v) == Storage::Inline && !checked_) {
      copy_operand(*def, tmp, tile);
      return tmp;
    }
    loops(t.shape, [&](const Index& idx) {
      line(tmp + "[" + tile.at(idx[0], idx[1]) + "] = " + store_conv(t.elem, expr(v, idx)) + ";");
    });
    return tmp;
  }

  // A wgmma's A computed in registers (wgmma_a_registers): its 16-bit values packed two to a
  // word, a word per run of its Mma layout (a run is two adjacent columns of one row: the word
  // trt::wgmma_issue_rs takes).
  std::string operand_registers(ValueId v) {
    const Type& t = f_.type(v);
    const std::string tmp = fresh("_ra");
    line("uint32_t " + tmp + "[" + std::to_string(per_thread(t.shape) / 2) + "];");
    runs(t.shape, [&](const std::string& run, const Index& idx) {
      std::string half[2];
      for (int64_t j = 0; j < 2; ++j) {
        half[j] = at_run_element(t.shape, run, idx, j, [&](const Index& i) {
          return "(uint32_t)" + store_conv(t.elem, expr(v, i));
        });
      }
      line(tmp + "[" + run + "] = " + half[0] + " | (" + half[1] + " << 16);");
    });
    return tmp;
  }

  // Load `op` (an operand tile) into `tmp` (laid out as `tile`) by the shape's runs: one access of
  // up to 16 bytes per run where the pointer allows and the lanes' masks all hold (with `async`,
  // a cp.async of 4 to 16 bytes), else each lane its own (a masked-off lane takes `other`).
  // (A run stays contiguous in a swizzled tile: runs are at most 16 bytes, aligned, and the
  // swizzle moves whole 16-byte chunks.)
  void copy_operand(const Op& op, const std::string& tmp, const OperandTile& tile,
                    bool async = false) {
    versioned_access(op, [&] { copy_runs(op, tmp, tile, async); });
  }
  // How copy_runs cuts load `op`'s tile under the forms in effect: runs of `vec` elements
  // (`blocked`: runs of the pointer's widest access instead of the layout's), `w` per access,
  // along the last dimension or (`axis` 0) down the columns of a K-major B.
  struct CopyRuns {
    int64_t vec = 1, blocked = 0, w = 1;
    int axis = -1;
    bool operator==(const CopyRuns& o) const {
      return vec == o.vec && blocked == o.blocked && w == o.w && axis == o.axis;
    }
    // Accesses per thread for a tile of `n` elements over `threads` threads.
    int64_t accesses(int64_t n, int64_t threads) const {
      return (n + vec * threads - 1) / (vec * threads) * (vec / w);
    }
  };
  CopyRuns copy_plan(const Op& op) const {
    const Type& t = f_.type(op.result());
    CopyRuns r;
    if (k_major_load(op)) {  // K-major B: runs down the columns, as wide as the pointer allows
      r.axis = 0;
      r.blocked = widest_access(op.operands[0], nullptr, 0);
      while (r.blocked > 1 && r.blocked * threads_ > numel(t.shape)) r.blocked /= 2;
      r.vec = r.w = r.blocked;
      return r;
    }
    r.vec = vec_of(t.shape);
    if (mma_layout(t.shape) && !checked_ && !shape_in_registers(t.shape)) {
      // The Mma layout's runs are two elements: with no register array of the shape to read,
      // the copy takes the widest runs its pointer allows, each thread at least one.
      r.blocked = widest_access(op.operands[0]);
      while (r.blocked > 1 && r.blocked * threads_ > numel(t.shape)) r.blocked /= 2;
      r.vec = r.blocked;
    }
    r.w = r.blocked ? r.blocked : std::max<int64_t>(1, access_width(op));
    return r;
  }
  void copy_runs(const Op& op, const std::string& tmp, const OperandTile& tile, bool async) {
    const Type& t = f_.type(op.result());
    const CopyRuns plan = copy_plan(op);
    const int64_t vec = plan.vec, blocked = plan.blocked, w = plan.w;
    // A pipelined load's run addresses hoisted out of its loop (hoist_run_bases), where they
    // were computed for this version of the access.
    const RunBases* hoisted = nullptr;
    if (auto it = run_bases_.find(&op);
        it != run_bases_.end() && it->second.forms == aff_ && it->second.plan == plan)
      hoisted = &it->second;
    std::string delta;  // this iteration's addresses less the first iteration's
    if (hoisted) {
      delta = fresh("_dp");
      line("const int64_t " + delta + " = (" + storage_type(t.elem) + " const*)(" +
           expr(op.operands[0], Index(t.shape.size(), "0")) + ") - " + hoisted->first + ";");
    }
    const int axis = plan.axis;
    const std::string vt = vec_type(t.elem, w);
    const bool masked = op.operands.size() > 1;
    const bool agree = masked && lanes_agree(op.operands[1], w, axis);
    auto slot = [&](const Index& i) { return tmp + "[" + tile.at(i[0], i[1]) + "]"; };
    runs(
        t.shape,
        [&](const std::string& run, const Index& idx) {
          for (int64_t c = 0; c < vec; c += w) {
            const std::string all = run_mask(op, t.shape, run, idx, c, w, agree, axis);
            const std::string ptr =
                hoisted ? "(" + hoisted->name + "[" + run + " * " + std::to_string(vec / w) +
                              " + " + std::to_string(c / w) + "] + " + delta + ")"
                        : at_run_element(
                              t.shape, run, idx, c,
                              [&](const Index& i) { return expr(op.operands[0], i); }, axis);
            const std::string dst = at_run_element(t.shape, run, idx, c, slot, axis);
            const int64_t bytes = w * static_cast<int64_t>(itemsize(t.elem));
            if (async && bytes >= 4 && (agree || !masked)) {  // 4, 8 or 16 bytes: cp.async
              if (!all.empty()) line("if (" + all + ") {");
              line("  trt::cp_async<" + std::to_string(bytes) + ">(&" + dst + ", " + ptr + ");");
            } else {
              if (!all.empty()) line("if (" + all + ") {");
              line("  *(" + vt + "*)&" + dst + " = *(const " + vt + "*)(" + ptr + ");");
            }
            if (all.empty()) continue;
            line("} else {");
            for (int64_t j = c; j < c + w; ++j) {
              line("  " + at_run_element(
                              t.shape, run, idx, j,
                              [&](const Index& i) {
                                const std::string other = store_conv(
                                    t.elem, op.operands.size() > 2 ? expr(op.operands[2], i)
                                                                   : std::string("0.0f"));
                                if (agree) return slot(i) + " = " + other + ";";
                                return slot(i) + " = (" + expr(op.operands[1], i) + ") ? *(" +
                                       expr(op.operands[0], i) + ") : " + other + ";";
                              },
                              axis));
            }
            line("}");
          }
        },
        blocked, axis);
  }

  // Whether `op`'s result is read only as an operand of a tensor-core dot (its accumulator in
  // registers) inside a region nested in the one being emitted: a loop-invariant operand.
  bool nested_mma_operand(const Op& op) {
    if (checked_ || op.results.size() != 1 || f_.type(op.result()).shape.size() != 2) return false;
    const auto& us = uses_.uses(op.result());
    if (us.size() != 1 || us.front().region == region_) return false;
    const Op& d = *us.front().user;
    return d.kind == OpKind::Dot && d.operands[0] != d.operands[1] &&
           d.operands[2] != op.result() && in_registers(d.result());
  }
  // After `op`: a loop-invariant dot operand goes to its tile once (a load by a copy from
  // global memory, any other value converted element by element), which the dot then reads.
  void hoist_operand(const Op& op) {
    if (!nested_mma_operand(op)) return;
    const ValueId v = op.result();
    const Op& d = *uses_.uses(v).front().user;
    const std::string tile = operand_tile(v, operand_layout(d, d.operands[0] == v ? 0 : 1));
    if (wgmma_registers(d)) {  // (fenced for wgmma's reads once, here)
      line("trt::fence_async_shared();");
      visible_.insert(v);
    }
    line("__syncthreads();");
    staged_[v] = tile;
  }

  // Whether dot `op`, emitted in the body of a tl::range loop, accumulates into the loop's
  // carried value in place: its accumulator is a carried value read only by it, and its result
  // is yielded to that same value and read by nothing else. Then the result is the carried
  // registers themselves (no copies in and out: under wgmma's asynchrony a copy of registers
  // in flight would wait for the products).
  bool accumulates_in_place(const Op& op) const {
    return for_body_ != nullptr && for_body_ == region_ && accumulates_into_carried(op, *for_body_);
  }
  // The same for dot `op` of the loop body `body` (which the pipeline plans before emitting it).
  bool accumulates_into_carried(const Op& op, const Region& body) const {
    const ValueId out = op.result(), acc = op.operands[2];
    if (!in_registers(acc) || uses_.uses(acc).size() != 1 || uses_.uses(out).size() != 1)
      return false;
    const Op& yield = *body.ops.back();
    for (size_t k = 1; k < body.args.size(); ++k) {
      if (body.args[k] == acc) return yield.operands[k - 1] == out;
    }
    return false;
  }

  // Tensor cores with the accumulator in this thread's registers (the Mma layout): the operands
  // as tiles in shared memory (operand_tile), the accumulator copied into the result's registers
  // (or the loop's carried registers used in place: accumulates_in_place), then trt::mma_tile.
  void mma_registers_dot(const Op& op) {
    const ValueId out = op.result(), acc = op.operands[2];
    const Type& at = f_.type(op.operands[0]);
    const Type& ot = f_.type(out);
    const int64_t M = ot.shape[0], N = ot.shape[1], K = at.shape[1];
    const DType el = at.elem;
    const MmaLayout& m = *mma_layout(ot.shape);
    const OperandTile ta = operand_layout(op, 0), tb = operand_layout(op, 1);
    const bool wgmma = wgmma_registers(op);
    const bool staged = staged_.count(op.operands[0]) && staged_.count(op.operands[1]);
    const bool ra = wgmma && !async_mma_ && wgmma_a_registers(op);
    // (operands already fenced for wgmma with the block synchronized after: no barrier here)
    const bool visible =
        (ra || visible_.count(op.operands[0])) && visible_.count(op.operands[1]) != 0;
    const std::string a16 =
        ra ? operand_registers(op.operands[0]) : operand_tile(op.operands[0], ta);
    const std::string b16 = operand_tile(op.operands[1], tb);
    // (staged: the loop's wait and barrier did it; wgmma_tile fences and synchronizes itself)
    if (!staged && !wgmma) line("__syncthreads();");
    if (&op == defer_dot_) {  // (acc is the multiply, aliased to the carried registers)
      alias(out, defer_acc_);
      in_place_[out] = defer_acc_;
    } else if (accumulates_in_place(op)) {
      alias(out, acc);
      in_place_[out] = acc;
    } else {
      declare_array(out);
      loops(
          ot.shape,
          [&](const Index& idx) {
            const std::string value = expr(acc, idx);
            line(element_of(out, name(out), idx) + " = " + value + ";");
          },
          Writes::Registers);
    }
    const std::string dims = std::to_string(M) + ", " + std::to_string(N) + ", " +
                             std::to_string(K) + ", " + std::to_string(m.wm) + ", " +
                             std::to_string(m.wn) + ", ";
    const std::string pitches = std::to_string(ta.pitch) + ", " + std::to_string(tb.pitch);
    const std::string bf16 = el == DType::BFloat16 ? "true" : "false";
    if (wgmma) {
      const int64_t ni = N <= 256 ? N : 256;
      wgmma_ops_.insert({ni, el == DType::BFloat16, tb.kmajor, ra});
      const std::string sb = std::to_string(swizzle_of((tb.kmajor ? K : N) * 2)) +
                             (tb.kmajor ? ", true" : "") + ">(" + a16 + ", " + b16 + ", " +
                             name(out) + ", _tid);";
      const std::string mnk = std::to_string(M) + ", " + std::to_string(N) + ", " +
                              std::to_string(K) + ", " + std::to_string(m.wm) + ", " + bf16 + ", ";
      if (ra) {
        if (!visible) {
          line("trt::fence_async_shared();");
          line("__syncthreads();");
        }
        line(std::string(&op == defer_dot_ ? "trt::wgmma_issue_rs<" : "trt::wgmma_now_rs<") + mnk +
             sb);
      } else {
        line(std::string(async_mma_ ? "trt::wgmma_tile_async<"
                         : visible  ? "trt::wgmma_now<"
                                    : "trt::wgmma_tile<") +
             mnk + std::to_string(swizzle_of(K * 2)) + ", " + sb);
      }
    } else if (tf32_dot(op)) {
      line("trt::mma_tile_tf32<" + dims + pitches + ">(" + a16 + ", " + b16 + ", " + name(out) +
           ", _tid);");
    } else {
      line("trt::mma_tile<" + dims + bf16 + ", " + pitches + (tb.kmajor ? ", true" : "") + ">(" +
           a16 + ", " + b16 + ", " + name(out) + ", _tid);");
    }
    // The operand tiles are written again next (a pipelined wgmma's loop synchronizes itself; in
    // a loop body, the last dot's barrier covers the tiles of those before it, which are written
    // again only in the next iteration; in a loop with a ring of tiles, the barrier that starts
    // each iteration covers them all, the ring's slots and the tiles the dots wrote).
    const bool later_dot =
        for_body_ != nullptr && for_body_ == region_ && !last_mma_of(op, *region_);
    const bool ring_loop = ring_body_ != nullptr && ring_body_ == region_;
    if (!(wgmma && async_mma_) && !later_dot && !ring_loop) line("__syncthreads();");
  }

  // a @ b + acc: one output element per thread, the k terms in order with one multiply-add each
  // (the CPU backend's and the interpreter's rounding); float32 inputs rounded to tf32 unless ieee.
  void dot(const Op& op) {
    if (in_registers(op.result())) return mma_registers_dot(op);
    const ValueId out = op.result(), acc = op.operands[2];
    const Type& at = f_.type(op.operands[0]);
    const Type& ot = f_.type(out);
    const int64_t K = at.shape[1], N = ot.shape[1];
    const auto precision = static_cast<ir::DotPrecision>(op.sub);
    const bool tf32 = at.elem == DType::Float32 && precision == ir::DotPrecision::TF32;
    const bool tf32x3 = at.elem == DType::Float32 && precision == ir::DotPrecision::TF32x3;
    const std::string rt = register_type(ot.elem);
    const std::string a = dot_operand(op.operands[0]), b = dot_operand(op.operands[1]);
    declare_array(out);
    auto in = [&](const std::string& arr, const std::string& ix) {
      std::string e = "(" + rt + ")(" + arr + "[" + ix + "])";
      return tf32 ? "trt::to_tf32(" + e + ")" : e;
    };
    const std::string fma = tf32x3 ? "trt::fma_tf32x3(" : "trt::fma(";
    const DType el = at.elem;
    const int64_t M = ot.shape[0];
    if (mma_dot_types(op) && !tf32_dot(op)) {
      // Tensor cores (trt::mma_dot): the accumulator into the result's shared array, then each
      // warp's 16 x 8 tiles of it through mma.sync.
      loops(ot.shape, [&](const Index& idx) {
        line(name(out) + "[" + flat(ot.shape, idx) + "] = " + expr(acc, idx) + ";");
      });
      line("trt::mma_dot<" + std::to_string(M) + ", " + std::to_string(N) + ", " +
           std::to_string(K) + ", " + (el == DType::BFloat16 ? "true" : "false") + ">(" + a + ", " +
           b + ", " + name(out) + ", _tid, " + std::to_string(threads_) + ");");
      line("__syncthreads();");
      return;
    }
    loops(ot.shape, [&](const Index& idx) {
      const std::string x = fresh("_acc"), k = fresh("_k");
      line(rt + " " + x + " = " + expr(acc, idx) + ";");
      line("for (int32_t " + k + " = 0; " + k + " < " + std::to_string(K) + "; ++" + k + ")");
      const std::string ai = in(a, idx[0] + " * " + std::to_string(K) + " + " + k);
      const std::string bi = in(b, k + " * " + std::to_string(N) + " + " + idx[1]);
      if (ot.is_float()) {
        line("  " + x + " = " + fma + ai + ", " + bi + ", " + x + ");");
      } else {
        line("  " + x + " = (" + rt + ")(" + x + " + " + ai + " * " + bi + ");");
      }
      line(name(out) + "[" + flat(ot.shape, idx) + "] = " + x + ";");
    });
  }

  // Where a reduction over `axis` of `in_shape` writes: the output array or the scalar slot.
  std::string reduce_dest(ValueId out, const Index& idx) {
    const Type& ot = f_.type(out);
    return ot.is_scalar() ? name(out) + "_s[0]" : name(out) + "[" + flat(ot.shape, idx) + "]";
  }
  void declare_result(ValueId out) {
    if (f_.type(out).is_scalar()) {
      scalar_slot(out);
    } else {
      declare_array(out);
    }
  }
  void finish_result(ValueId out) {
    if (f_.type(out).is_scalar()) publish(out);
  }

  static Index with_axis(const Index& idx, size_t axis, const std::string& k) {
    Index ix = idx;
    ix.insert(ix.begin() + static_cast<std::ptrdiff_t>(axis), k);
    return ix;
  }

  // A butterfly of shuffles folding a warp's lanes into `acc`. Each shuffle is a statement of its
  // own: inside a combine (`b > a ? b : a`, `a || b`) it would run on some lanes only, and a
  // full-mask shuffle that not every lane reaches hangs the warp.
  void warp_fold(ir::ReduceKind k, const Type& ot, const std::string& acc, const std::string& m) {
    const std::string sh = fresh("_sh");
    line("for (int " + m + " = 16; " + m + " >= 1; " + m + " >>= 1) {");
    ++indent_;
    line(std::string(register_type(ot.elem)) + " const " + sh + " = trt::shfl_xor(" + acc + ", " +
         m + ");");
    line(acc + " = " + reduce_combine(k, ot, acc, sh) + ";");
    --indent_;
    line("}");
  }

  // mma_row_reduction: per row of each of this thread's tile rows (i, and the half h: rows g and
  // g + 8), its 2 TN elements folded in slot order; then the quad's lanes (xor 1, 2); then, with
  // WN warps across the columns, their partials through shared memory in column order.
  void mma_row_reduce(const Op& op) {
    const auto k = static_cast<ir::ReduceKind>(op.sub);
    const ValueId out = op.result(), in = op.operands[0];
    const Type& it = f_.type(in);
    const Type& ot = f_.type(out);
    const MmaLayout& m = *mma_layout(it.shape);
    const int64_t M = it.shape[0], N = it.shape[1];
    const int64_t tm = M / m.wm / 16, tn = N / m.wn / 8;
    const std::string rt = register_type(ot.elem);
    const std::string acc = fresh("_acc"), q = fresh("_q"), sh = fresh("_sh");
    const std::string rows = std::to_string(tm * 2);
    line(rt + " " + acc + "[" + rows + "];");
    line("#pragma unroll");
    line("for (int " + q + " = 0; " + q + " < " + rows + "; ++" + q + ") " + acc + "[" + q +
         "] = " + reduce_init(k, ot) + ";");
    loops(
        it.shape,
        [&](const Index& idx) {
          // slot s: run s >> 1 = 2 (i TN + j) + h, so its row's accumulator is 2 i + h
          const std::string run = "(" + elem_loops_.back().slot + " >> 1)";
          const std::string a =
              acc + "[" + run + " / " + std::to_string(2 * tn) + " * 2 + (" + run + " & 1)]";
          line(a + " = " + reduce_combine(k, ot, a, expr(in, idx)) + ";");
        },
        Writes::Registers);
    line("#pragma unroll");
    line("for (int " + q + " = 0; " + q + " < " + rows + "; ++" + q + ") {");
    ++indent_;
    for (const char* lanes : {"1", "2"}) {
      line(rt + " const " + sh + lanes + " = trt::shfl_xor(" + acc + "[" + q + "], " + lanes +
           ");");
      line(acc + "[" + q + "] = " + reduce_combine(k, ot, acc + "[" + q + "]", sh + lanes) + ";");
    }
    --indent_;
    line("}");
    declare_array(out);
    if (in_registers(out)) {  // the row-slice layout: every lane of the quad holds its rows' totals
      line("#pragma unroll");
      line("for (int " + q + " = 0; " + q + " < " + rows + "; ++" + q + ") " + name(out) + "[" + q +
           "] = " + round_to(ot.elem, acc + "[" + q + "]") + ";");
      return;
    }
    const std::string row = mma_row(m, q + " / 2", "(" + q + " & 1)");
    const std::string dest = m.wn == 1 ? name(out) : fresh("_part");
    if (m.wn > 1) smem_array(dest, ot, m.wn * M);
    const std::string col =
        m.wn == 1 ? ""
                  : "(_tid >> 5) % " + std::to_string(m.wn) + " * " + std::to_string(M) + " + ";
    // In a loop, every thread has read the previous iteration's result before it is replaced.
    if (loop_depth_ > 0) line("__syncthreads();");
    line("if ((_tid & 3) == 0) {");
    line("  #pragma unroll");
    line("  for (int " + q + " = 0; " + q + " < " + rows + "; ++" + q + ") " + dest + "[" + col +
         row + "] = " + (m.wn == 1 ? round_to(ot.elem, acc + "[" + q + "]") : acc + "[" + q + "]") +
         ";");
    line("}");
    line("__syncthreads();");
    if (m.wn == 1) return;
    const std::string e = fresh("_e"), w = fresh("_w"), r = fresh("_r");
    line("for (int32_t " + e + " = _tid; " + e + " < " + std::to_string(M) + "; " + e +
         " += " + std::to_string(threads_) + ") {");
    ++indent_;
    line(rt + " " + r + " = " + dest + "[" + e + "];");
    line("for (int " + w + " = 1; " + w + " < " + std::to_string(m.wn) + "; ++" + w + ") " + r +
         " = " +
         reduce_combine(k, ot, r, dest + "[" + w + " * " + std::to_string(M) + " + " + e + "]") +
         ";");
    line(name(out) + "[" + e + "] = " + round_to(ot.elem, r) + ";");
    --indent_;
    line("}");
    line("__syncthreads();");
  }

  void reduce(const Op& op) {
    const auto k = static_cast<ir::ReduceKind>(op.sub);
    if (k == ir::ReduceKind::ArgMax || k == ir::ReduceKind::ArgMin) return arg_reduce(op);
    if (mma_row_reduction(op)) return mma_row_reduce(op);
    const ValueId out = op.result(), in = op.operands[0];
    const Type& it = f_.type(in);
    const Type& ot = f_.type(out);
    const auto axis = static_cast<size_t>(op.ival);
    const int64_t len = it.shape[axis];
    const std::string rt = register_type(ot.elem);
    const std::string init = reduce_init(k, ot);
    SmallVector<int64_t, 4> outer = it.shape;
    outer.erase(outer.begin() + static_cast<std::ptrdiff_t>(axis));
    int64_t outputs = 1;
    for (int64_t s : outer) outputs *= s;
    const int warps = threads_ / 32;
    if (block_reduction(op)) {
      // The whole tile to one value: each thread folds its elements in the element loop's order
      // (register arrays in place), each warp its lanes by a butterfly of shuffles (every lane
      // ends with the warp's value), then every thread folds the warps' partials in order.
      const std::string acc = fresh("_acc"), m = fresh("_m"), w = fresh("_w"),
                        part = fresh("_part");
      line(rt + " " + acc + " = " + init + ";");
      loops(
          it.shape,
          [&](const Index& idx) {
            line(acc + " = " + reduce_combine(k, ot, acc, expr(in, idx)) + ";");
          },
          Writes::Registers);
      warp_fold(k, ot, acc, m);
      if (warps > 1) {
        smem_array(part, ot.scalar_type(), warps);
        line("if ((_tid & 31) == 0) " + part + "[_tid >> 5] = " + acc + ";");
        line("__syncthreads();");
        line(acc + " = " + part + "[0];");
        line("for (int " + w + " = 1; " + w + " < " + std::to_string(warps) + "; ++" + w + ") " +
             acc + " = " + reduce_combine(k, ot, acc, part + "[" + w + "]") + ";");
        // In a loop the partials are written again in the next iteration: all read them first.
        if (loop_depth_ > 0) line("__syncthreads();");
      }
      if (ot.is_scalar()) {
        line(type_str(ot) + " const " + name(out) + " = " + round_to(ot.elem, acc) + ";");
      } else {  // a one-element tile ([1, n] reduced along 1)
        declare_array(out);
        line("if (_tid == 0) " + name(out) + "[0] = " + round_to(ot.elem, acc) + ";");
        line("__syncthreads();");
      }
      return;
    }
    declare_result(out);
    if (outputs >= threads_ || len <= 32) {
      // A thread per output, folding the axis in order.
      loops(outer, [&](const Index& idx) {
        const std::string acc = fresh("_acc"), j = fresh("_j");
        line(rt + " " + acc + " = " + init + ";");
        line("for (int32_t " + j + " = 0; " + j + " < " + std::to_string(len) + "; ++" + j + ") " +
             acc + " = " + reduce_combine(k, ot, acc, expr(in, with_axis(idx, axis, j))) + ";");
        line(reduce_dest(out, idx) + " = " + round_to(ot.elem, acc) + ";");
      });
    } else {
      // A warp per output: lanes stride the axis, then a butterfly of shuffles.
      const std::string o = fresh("_o"), acc = fresh("_acc"), j = fresh("_j"), m = fresh("_m");
      line("for (int32_t " + o + " = _tid >> 5; " + o + " < " + std::to_string(outputs) + "; " + o +
           " += " + std::to_string(warps) + ") {");
      ++indent_;
      const Index idx = decode(outer, o);
      line(rt + " " + acc + " = " + init + ";");
      line("for (int32_t " + j + " = _tid & 31; " + j + " < " + std::to_string(len) + "; " + j +
           " += 32) " + acc + " = " +
           reduce_combine(k, ot, acc, expr(in, with_axis(idx, axis, j))) + ";");
      warp_fold(k, ot, acc, m);
      line("if ((_tid & 31) == 0) " + reduce_dest(out, idx) + " = " + round_to(ot.elem, acc) + ";");
      --indent_;
      line("}");
      line("__syncthreads();");
    }
    finish_result(out);
  }

  // argmax/argmin: a thread per output keeps the first best index (a NaN wins).
  void arg_reduce(const Op& op) {
    const ValueId out = op.result(), in = op.operands[0];
    const Type& it = f_.type(in);
    const bool is_max = static_cast<ir::ReduceKind>(op.sub) == ir::ReduceKind::ArgMax;
    const auto axis = static_cast<size_t>(op.ival);
    const bool fl = is_floating_point(it.elem);
    const std::string rt = register_type(it.elem);
    declare_result(out);
    SmallVector<int64_t, 4> outer = it.shape;
    outer.erase(outer.begin() + static_cast<std::ptrdiff_t>(axis));
    loops(outer, [&](const Index& idx) {
      const std::string best = fresh("_best"), bi = fresh("_bi"), k = fresh("_k"), x = fresh("_x");
      line(rt + " " + best + " = " + expr(in, with_axis(idx, axis, "0")) + ";");
      line("int32_t " + bi + " = 0;");
      line("for (int32_t " + k + " = 1; " + k + " < " + std::to_string(it.shape[axis]) + "; ++" +
           k + ") {");
      ++indent_;
      line(rt + " const " + x + " = " + expr(in, with_axis(idx, axis, k)) + ";");
      std::string better = "(" + x + (is_max ? " > " : " < ") + best + ")";
      if (fl)
        better = "(" + better + " || (" + x + " != " + x + " && " + best + " == " + best + "))";
      line("if (" + better + ") { " + best + " = " + x + "; " + bi + " = " + k + "; }");
      --indent_;
      line("}");
      line(reduce_dest(out, idx) + " = " + bi + ";");
    });
    finish_result(out);
  }

  // tl.reduce / tl.associative_scan with a combine region: a thread per output folds the axis in
  // order (the interpreter's and the CPU's order); the region is scalar code inside the loop.
  void reduce_fn(const Op& op) {
    const bool scan = op.kind == OpKind::ScanFn, reverse = op.sub == 1;
    const Region& comb = op.regions[0];
    const size_t n_in = op.operands.size();
    const Type& it = f_.type(op.operands[0]);
    const auto axis = static_cast<size_t>(op.ival);
    const int64_t len = it.shape[axis];
    SmallVector<int64_t, 4> outer = it.shape;
    outer.erase(outer.begin() + static_cast<std::ptrdiff_t>(axis));
    for (ValueId r : op.results) declare_result(r);
    loops(outer, [&](const Index& idx) {
      const std::string j = fresh("_j");
      auto dest = [&](size_t k, const std::string& pos) {
        const ValueId r = op.results[k];
        const Type& rt = f_.type(r);
        if (rt.is_scalar()) return name(r) + "_s[0]";
        return name(r) + "[" + flat(rt.shape, scan ? with_axis(idx, axis, pos) : idx) + "]";
      };
      const std::string first = reverse ? std::to_string(len - 1) : "0";
      std::vector<std::string> acc;
      for (size_t k = 0; k < n_in; ++k) {
        acc.push_back(fresh("_acc"));
        line(type_str(f_.type(op.operands[k]).scalar_type()) + " " + acc[k] + " = " +
             expr(op.operands[k], with_axis(idx, axis, first)) + ";");
        if (scan) line(dest(k, first) + " = " + acc[k] + ";");
      }
      if (reverse) {
        line("for (int32_t " + j + " = " + std::to_string(len - 2) + "; " + j + " >= 0; --" + j +
             ") {");
      } else {
        line("for (int32_t " + j + " = 1; " + j + " < " + std::to_string(len) + "; ++" + j + ") {");
      }
      ++indent_;
      for (size_t k = 0; k < n_in; ++k) {
        const std::string ty = type_str(f_.type(comb.args[k]));
        line(ty + " const " + name(comb.args[k]) + " = " + acc[k] + ";");
        line(ty + " const " + name(comb.args[n_in + k]) + " = " +
             expr(op.operands[k], with_axis(idx, axis, j)) + ";");
      }
      region(comb);
      const Op& y = *comb.ops.back();
      std::vector<std::string> tmp;
      for (size_t k = 0; k < n_in; ++k) {
        tmp.push_back(fresh("_y"));
        line(type_str(f_.type(comb.args[k])) + " const " + tmp[k] + " = " +
             expr(y.operands[k], {}) + ";");
      }
      for (size_t k = 0; k < n_in; ++k) {
        line(acc[k] + " = " + tmp[k] + ";");
        if (scan) line(dest(k, j) + " = " + acc[k] + ";");
      }
      --indent_;
      line("}");
      if (!scan) {
        for (size_t k = 0; k < n_in; ++k) line(dest(k, "") + " = " + acc[k] + ";");
      }
    });
    for (ValueId r : op.results) finish_result(r);
  }

  // Atomics: a thread per lane; a masked-off lane does nothing and gives 0.
  void atomic(const Op& op) {
    const ValueId out = op.result();
    const Type& pt = f_.type(op.operands[0]);
    const bool cas = op.kind == OpKind::AtomicCas;
    const bool masked = !cas && op.operands.size() > 2;
    declare_result(out);
    loops(pt.shape, [&](const Index& idx) {
      const std::string dst = reduce_dest(out, idx);
      const std::string p = expr(op.operands[0], idx), v = expr(op.operands[1], idx);
      const std::string call =
          atomic_call(f_, op, p, v, cas ? v : "", cas ? expr(op.operands[2], idx) : "");
      if (const std::string cond = lane_guard(op, masked ? 2 : 0, "atomic", idx); !cond.empty()) {
        line("if (" + cond + ") " + dst + " = " + call + "; else " + dst + " = 0;");
      } else {
        line(dst + " = " + call + ";");
      }
    });
    finish_result(out);
  }

  // device_print: one line per element (Triton's format), the program id first.
  void print(const Op& op) {
    for (size_t k = 0; k < op.operands.size(); ++k) {
      const ValueId v = op.operands[k];
      const PrintFormat pf = print_format(f_, op, k);
      loops(f_.type(v).shape, [&](const Index& idx) {
        std::string ix = "(";
        std::string ixargs;
        for (size_t d = 0; d < idx.size(); ++d) {
          ix += std::string(d ? ", " : "") + "%d";
          ixargs += ", (int)(" + idx[d] + ")";
        }
        ix += ")";
        line("printf(\"pid (%d, %d, %d) idx " + ix + " " + pf.prefix + pf.label + ": " +
             pf.conversion + "\\n\", _pid0, _pid1, _pid2" + ixargs + ", " + pf.cast + expr(v, idx) +
             "));");
      });
    }
  }

  // ---- control flow (uniform: every thread takes the same path) ---------------------------------

  void declare_var(ValueId v) {
    if (storage(v) == Storage::Array) {
      declare_array(v);
    } else {
      line(type_str(f_.type(v)) + " " + name(v) + ";");
    }
  }

  void assign(ValueId dst, const std::string& dst_name, ValueId src) {
    const Type& t = f_.type(dst);
    if (t.is_scalar()) {
      line(dst_name + " = " + expr(src, {}) + ";");
      return;
    }
    loops(
        t.shape,
        [&](const Index& idx) {
          const std::string value = expr(src, idx);
          line(element_of(dst, dst_name, idx) + " = " + value + ";");
        },
        in_registers(dst) ? Writes::Registers : Writes::Memory);
  }

  // Two-phase parallel assignment (values may swap): every source into a temporary, then the
  // temporaries into the destinations.
  void parallel_assign(const std::vector<ValueId>& dsts, const std::vector<ValueId>& srcs) {
    std::vector<std::string> temps;
    // (a dot that accumulated in place already wrote its carried value)
    auto in_place = [&](size_t i) {
      auto it = in_place_.find(srcs[i]);
      return it != in_place_.end() && it->second == dsts[i];
    };
    for (size_t i = 0; i < dsts.size(); ++i) {
      temps.emplace_back();
      if (in_place(i)) continue;
      const Type& t = f_.type(dsts[i]);
      const std::string tmp = fresh("_t");
      temps.back() = tmp;
      if (t.is_scalar()) {
        line(type_str(t) + " const " + tmp + " = " + expr(srcs[i], {}) + ";");
      } else {
        if (in_registers(dsts[i])) {
          declare_registers(tmp, t);
        } else {
          smem_array(tmp, t, t.numel());
        }
        assign(dsts[i], tmp, srcs[i]);
      }
    }
    for (size_t i = 0; i < dsts.size(); ++i) {
      if (in_place(i)) continue;
      const Type& t = f_.type(dsts[i]);
      if (t.is_scalar()) {
        line(name(dsts[i]) + " = " + temps[i] + ";");
      } else {
        loops(
            t.shape,
            [&](const Index& idx) {
              line(element_of(dsts[i], name(dsts[i]), idx) + " = " +
                   element_of(dsts[i], temps[i], idx) + ";");
            },
            in_registers(dsts[i]) ? Writes::Registers : Writes::Memory);
      }
    }
  }

  void alias(ValueId v, ValueId target) {
    const Type& t = f_.type(v);
    if (t.is_scalar()) {
      line(type_str(t) + " const " + name(v) + " = " + name(target) + ";");
    } else if (in_registers(v)) {
      line("auto& " + name(v) + " = " + name(target) + ";");
    } else {
      line(type_str(t) + "* const " + name(v) + " = " + name(target) + ";");
    }
  }

  // ---- pipelined loops (num_stages) ------------------------------------------------------------
  //
  // A loop whose dots run on tensor cores from operands it loads (each load used only by
  // its dot, its address and mask computed in the loop from the induction variable and values
  // from outside) keeps `num_stages` copies of each operand tile in shared memory, a ring: before
  // the loop the first S - 1 iterations' tiles are requested with cp.async; each iteration
  // requests iteration i + S - 1's into the slot iteration i - 1 used, waits for its own, and
  // computes while the next ones are in flight (Triton's software pipeliner, sm_80 form). A
  // later iteration's addresses come from the ops that compute them, emitted again in a block
  // that binds the induction variable's name to that iteration's value.

  struct Staged {
    ValueId load;
    OperandTile tile;  // one slot's layout
    int64_t bytes;     // of one element (2, or 4 for tf32)
    std::string ring;  // the first slot
  };
  struct Pipeline {
    int64_t stages = 0;
    // wgmma overlapped with the loop: every tensor-core dot of the body is a wgmma on staged
    // operands accumulating into a carried value in place; each iteration waits only for the
    // previous iteration's products, so tiles are requested stages - 2 iterations ahead (a slot is
    // rewritten once the products that read it are done in every warpgroup).
    bool async_mma = false;
    // ... and the tiles of iteration i + stages - 1 requested at the end of iteration i, after a
    // barrier (the slot is iteration i - 1's, whose products every warpgroup has waited for).
    bool late_request = false;
    bool wgmma = false;  // some dot of the body reading a staged tile runs on wgmma
    // The last dot's wait deferred (TESSERA_CUDA_WGMMA_DEFER): `acc * alpha + p @ v` with p in
    // registers, v staged, acc carried, issued without a wait; the multiply (in place in the
    // carried registers) waits first, in the next iteration. The ring has stages + 1 slots so that
    // the slot the products in flight read is refilled only two iterations later.
    const Op* defer_dot = nullptr;
    const Op* defer_mul = nullptr;
    ValueId defer_acc = 0;
    int64_t slots() const { return stages + (defer_dot ? 1 : 0); }
    std::vector<Staged> loads;
    std::vector<const Op*> slice;  // the loop's ops the loads' addresses need, in order
  };

  // Adds to `slice` what `v` needs from the loop body `body`; false if something cannot be
  // computed for another iteration (a carried value, a load, an array).
  bool address_slice(ValueId v, const Region& body, std::set<const Op*>& slice) {
    if (v == body.args[0]) return true;  // the induction variable
    for (size_t k = 1; k < body.args.size(); ++k) {
      if (body.args[k] == v) return false;
    }
    const Op* d = f_.def(v);
    if (!d || std::find(body.ops.begin(), body.ops.end(), d) == body.ops.end()) return true;
    if (slice.count(d)) return true;
    switch (d->kind) {
      case OpKind::Load:
      case OpKind::Store:
      case OpKind::Atomic:
      case OpKind::AtomicCas:
      case OpKind::Dot:
      case OpKind::Reduce:
      case OpKind::ReduceFn:
      case OpKind::ScanFn:
      case OpKind::Assert:
      case OpKind::Print:
      case OpKind::Extern:
      case OpKind::Yield:
        return false;
      default:
        break;
    }
    if (!d->regions.empty()) return false;
    for (ValueId r : d->results) {
      const Storage st = storage(r);
      if (st != Storage::Scalar && st != Storage::Inline) return false;
    }
    slice.insert(d);
    for (ValueId o : d->operands) {
      if (!address_slice(o, body, slice)) return false;
    }
    return true;
  }

  Pipeline pipeline_plan(const Op& loop) {
    Pipeline p;
    const int stages = ir::LoopOptions::unpack(loop.ival).num_stages;
    p.stages = stages > 0 ? stages : f_.attrs.num_stages;
    if (checked_ || p.stages < 2) return {};
    const Region& body = loop.regions[0];
    std::set<const Op*> slice;
    for (const Op* o : body.ops) {
      if (o->kind != OpKind::Dot || !in_registers(o->result())) continue;
      for (int k = 0; k < 2; ++k) {
        const ValueId v = o->operands[static_cast<size_t>(k)];
        const Op* d = f_.def(v);
        if (!d || d->kind != OpKind::Load || storage(v) != Storage::Inline ||
            std::find(body.ops.begin(), body.ops.end(), d) == body.ops.end() ||
            uses_.uses(v).size() != 1 || o->operands[0] == o->operands[1])
          continue;
        std::set<const Op*> s = slice;
        bool ok = true;
        for (ValueId x : d->operands) ok = ok && address_slice(x, body, s);
        if (!ok) continue;
        slice = std::move(s);
        const Type& t = f_.type(v);
        const OperandTile tile = operand_layout(*o, static_cast<size_t>(k));
        p.loads.push_back({v, tile, static_cast<int64_t>(itemsize(t.elem)), fresh("_ring")});
        p.wgmma = p.wgmma || wgmma_registers(*o);
      }
    }
    if (p.loads.empty()) return {};
    // Fewer stages where S rings would not fit the device's shared memory (beside what is
    // already placed); one stage is no ring.
    auto ring_bytes = [&](int64_t stages) {
      int64_t b = 0;
      for (const Staged& s : p.loads) {
        const int64_t a = s.tile.align();
        b += (stages * s.tile.elems() * s.bytes + a - 1) / a * a + (a > 16 ? a - 16 : 0);
      }
      return b;
    };
    const int64_t asked = p.stages;
    plan_defer(loop, p);
    while (p.stages >= 2 && smem_ + ring_bytes(p.slots()) > max_shared_) --p.stages;
    if (p.stages < 2 && p.defer_dot) {  // (the deferred dot's extra slot is what did not fit)
      p.defer_dot = p.defer_mul = nullptr;
      p.stages = asked;
      while (p.stages >= 2 && smem_ + ring_bytes(p.slots()) > max_shared_) --p.stages;
    }
    if (p.stages < 2) return {};
    for (const Op* o : body.ops) {
      if (slice.count(o)) p.slice.push_back(o);
    }
    p.async_mma = p.stages >= 3 && knobs().cuda_wgmma_async != 0;
    for (const Op* o : body.ops) {
      if (o->kind != OpKind::Dot || !in_registers(o->result())) continue;
      auto staged = [&](ValueId v) {
        return std::any_of(p.loads.begin(), p.loads.end(),
                           [&](const Staged& s) { return s.load == v; });
      };
      p.async_mma = p.async_mma && wgmma_registers(*o) && staged(o->operands[0]) &&
                    staged(o->operands[1]) && accumulates_into_carried(*o, body);
    }
    // Only once async_mma is final: a loop it turned off (mma.sync, sm_80) requests its tiles
    // before the wait alone. (Set before the check, the mma.sync ring requested every tile twice,
    // before the wait and again after the products: 179-221 TFLOP/s instead of 270-302 on an
    // H100, docs/benchmarks.md.)
    p.late_request = p.async_mma && knobs().cuda_wgmma_async == 2;
    if (p.async_mma) p.defer_dot = p.defer_mul = nullptr;
    return p;
  }

  // The deferred last dot of a pipelined loop (Pipeline::defer_dot): the body's last
  // tensor-core dot runs on wgmma with A in registers and B a staged tile, and accumulates into
  // `carried * x` (or `x * carried`; computed inline or into registers), a multiply read by
  // nothing else, of a carried value read by nothing else, the dot's result yielded to that carried
  // value and read by nothing else.
  // By default (TESSERA_CUDA_WGMMA_DEFER unset) only in blocks of two or more warpgroups: on an
  // H100 it sped up every 8-warp attention config at D = 128 (128 x 64: 3.37 -> 3.00 ms) and the
  // best at D = 64, and slowed the 4-warp ones at D = 64 (64 x 128: 2.01 -> 2.60 ms), whose
  // blocks share an SM two or three at a time (docs/benchmarks.md).
  void plan_defer(const Op& loop, Pipeline& p) const {
    const int defer = knobs().cuda_wgmma_defer;
    if (defer == 0 || (defer < 0 && threads_ < 256) || checked_) return;
    const Region& body = loop.regions[0];
    const Op* dot = nullptr;
    for (auto it = body.ops.rbegin(); it != body.ops.rend() && !dot; ++it) {
      if ((*it)->kind == OpKind::Dot && in_registers((*it)->result())) dot = *it;
    }
    if (!dot || !wgmma_a_registers(*dot) ||
        std::none_of(p.loads.begin(), p.loads.end(),
                     [&](const Staged& st) { return st.load == dot->operands[1]; }))
      return;
    const ValueId acc = dot->operands[2], out = dot->result();
    const Op* mul = f_.def(acc);
    if (!mul || mul->kind != OpKind::Binary ||
        static_cast<ir::BinaryKind>(mul->sub) != ir::BinaryKind::Mul ||
        std::find(body.ops.begin(), body.ops.end(), mul) == body.ops.end() ||
        uses_.uses(acc).size() != 1 || uses_.uses(out).size() != 1)
      return;
    const Op& yield = *body.ops.back();
    for (size_t k = 1; k < body.args.size(); ++k) {
      const ValueId c = body.args[k];
      if (yield.operands[k - 1] != out || uses_.uses(c).size() != 1 || !in_registers(c) ||
          f_.type(c).shape != f_.type(acc).shape || f_.type(c).elem != f_.type(acc).elem)
        continue;
      if (mul->operands[0] == c || mul->operands[1] == c) {
        p.defer_dot = dot;
        p.defer_mul = mul;
        p.defer_acc = c;
        return;
      }
    }
  }

  // A pipelined load's pointer tile is, in the loops people write, a tile from outside the loop
  // plus offsets uniform over the tile (`a_ptrs += BK` becomes `a_ptrs0 + k * BK`; `a + rm * K +
  // (k0 + rk)` is `a + rm * K + rk` plus `k0`). Then each run's address in iteration i is its
  // address in the loop's first iteration plus one difference, the same for every run: the first
  // iteration's addresses are computed once before the loop, into registers, and each request
  // computes the difference once (the pointer at element 0) and adds it to every copy's (a
  // 128 x 64 wgmma tile: 8 instructions per cp.async -> 3 in the SASS). Offsets are taken not to
  // wrap int32, as everywhere in Triton's addressing.
  struct RunBases {
    std::string name;                       // the array of run addresses (first iteration)
    std::string first;                      // the address of element 0 in the first iteration
    const ir::AffineInfo* forms = nullptr;  // the version of the access they are for
    CopyRuns plan;
  };
  // Whether `v` (an integer or pointer tile, or a scalar) is, in every iteration of loop body
  // `body`, a value that does not depend on the iteration plus one uniform over the tile.
  bool splits(ValueId v, const Region& body) const {
    const Op* d = f_.def(v);
    const Type& t = f_.type(v);
    if (!t.is_scalar() && storage(v) == Storage::Array) return false;  // (read per element)
    if (t.is_scalar() || invariant(v, body)) return true;
    if (!d) return false;  // a carried value
    if (const ir::AffineForm* u = affine_.form(v); u && u->uniform()) return true;
    switch (d->kind) {
      case OpKind::AddPtr:
      case OpKind::Broadcast:
      case OpKind::ExpandDims:
      case OpKind::Permute:
      case OpKind::Splat:
        for (ValueId o : d->operands)
          if (!splits(o, body)) return false;
        return true;
      case OpKind::Binary: {
        const auto k = static_cast<ir::BinaryKind>(d->sub);
        if (k == ir::BinaryKind::Add || k == ir::BinaryKind::Sub)
          return splits(d->operands[0], body) && splits(d->operands[1], body);
        if (k == ir::BinaryKind::Mul)  // (x + u) * c with c the same in every iteration
          return (invariant(d->operands[1], body) && splits(d->operands[0], body)) ||
                 (invariant(d->operands[0], body) && splits(d->operands[1], body));
        return false;
      }
      default:
        return false;
    }
  }
  // Whether `v` is the same in every iteration of loop body `body`: defined outside it, or
  // computed in it by arithmetic and views from such values.
  bool invariant(ValueId v, const Region& body) const {
    const Op* d = f_.def(v);
    if (!d) return std::find(body.args.begin(), body.args.end(), v) == body.args.end();
    if (std::find(body.ops.begin(), body.ops.end(), d) == body.ops.end()) return true;
    switch (d->kind) {
      case OpKind::Constant:
      case OpKind::Arange:
      case OpKind::ProgramId:
      case OpKind::NumPrograms:
      case OpKind::Splat:
      case OpKind::Broadcast:
      case OpKind::ExpandDims:
      case OpKind::Permute:
      case OpKind::Binary:
      case OpKind::Cast:
        for (ValueId o : d->operands)
          if (!invariant(o, body)) return false;
        return true;
      default:
        return false;
    }
  }
  void hoist_run_bases(const Op& loop, const Pipeline& pipe) {
    const Region& body = loop.regions[0];
    std::vector<std::pair<const Op*, RunBases>> hoisted;
    for (const Staged& s : pipe.loads) {
      const Op& load = *f_.def(s.load);
      if (!splits(load.operands[0], body)) continue;
      RunBases rb;
      rb.name = fresh("_rb");
      rb.first = rb.name + "_0";
      hoisted.emplace_back(&load, std::move(rb));
    }
    if (hoisted.empty()) return;
    // The arrays, sized for the wider version of a versioned access; then the loop's first
    // iteration's addresses, in a block that binds the induction variable to the lower bound.
    std::vector<int64_t> sizes;
    for (auto& entry : hoisted) {  // (no structured bindings: lambdas capture these; clang 14)
      const Op* load = entry.first;
      RunBases& rb = entry.second;
      const Type& t = f_.type(load->result());
      auto entries = [&](const ir::AffineInfo* forms) {
        aff_ = forms;
        const CopyRuns plan = copy_plan(*load);
        aff_ = &affine_;
        return plan.accesses(numel(t.shape), threads_);
      };
      sizes.push_back(std::min(entries(&affine_), entries(&affine_rem_)));
      if (sizes.back() > 16) continue;  // (registers)
      const std::string pt = std::string(storage_type(t.elem)) + " const*";
      line(pt + " " + rb.name + "[" + std::to_string(sizes.back()) + "];");
      line(pt + " " + rb.first + ";");
    }
    const ValueId iv = body.args[0];
    line("{");
    ++indent_;
    line(type_str(f_.type(iv)) + " const " + name(iv) + " = (" + type_str(f_.type(iv)) + ")(" +
         expr(loop.operands[0], {}) + ");");
    for (const Op* o : pipe.slice) this->op(*o);
    for (size_t h = 0; h < hoisted.size(); ++h) {
      const Op* load = hoisted[h].first;
      RunBases& rb = hoisted[h].second;
      if (sizes[h] > 16) continue;
      const Type& t = f_.type(load->result());
      const std::string pt = std::string(storage_type(t.elem)) + " const*";
      const ValueId p = load->operands[0];
      line(rb.first + " = (" + pt + ")(" + expr(p, Index(t.shape.size(), "0")) + ");");
      versioned_access(*load, [&] {
        const CopyRuns plan = copy_plan(*load);
        const int64_t per_run = plan.vec / plan.w;
        if (plan.accesses(numel(t.shape), threads_) > sizes[h] || rb.forms)
          return;  // one version at most
        rb.forms = aff_;
        rb.plan = plan;
        runs(
            t.shape,
            [&](const std::string& run, const Index& idx) {
              for (int64_t c = 0; c < plan.vec; c += plan.w) {
                line(rb.name + "[" + run + " * " + std::to_string(per_run) + " + " +
                     std::to_string(c / plan.w) + "] = " +
                     at_run_element(
                         t.shape, run, idx, c,
                         [&](const Index& i) { return "(" + pt + ")(" + expr(p, i) + ")"; },
                         plan.axis) +
                     ";");
              }
            },
            plan.blocked, plan.axis);
      });
      if (rb.forms) run_bases_[load] = std::move(rb);
    }
    --indent_;
    line("}");
  }

  // Requests iteration `iv_value`'s operand tiles into ring slot `slot` (if that iteration runs),
  // then closes the group.
  void request_stage(const Op& loop, const Pipeline& p, const std::string& iv_value,
                     const std::string& slot) {
    const ValueId iv = loop.regions[0].args[0];
    const std::string it = type_str(f_.type(iv));
    const std::string next = fresh("_nx");
    line("{");
    ++indent_;
    line(it + " const " + next + " = " + iv_value + ";");
    line("if (" + next + " < " + expr(loop.operands[1], {}) + ") {");
    ++indent_;
    line(it + " const " + name(iv) + " = " + next + ";");
    for (const Op* o : p.slice) this->op(*o);
    for (const Staged& s : p.loads) {
      // (the slot's address once: each copy's is then one add)
      const std::string dst = fresh("_slot");
      const std::string ct = storage_type(f_.type(s.load).elem);
      line(ct + "* const " + dst + " = " + s.ring + " + (" + slot + ") * " +
           std::to_string(s.tile.elems()) + ";");
      copy_operand(*f_.def(s.load), dst, s.tile, /*async=*/true);
    }
    --indent_;
    line("}");
    line("trt::cp_async_commit();");
    --indent_;
    line("}");
  }

  void for_op(const Op& op) {
    const Region& body = op.regions[0];
    const ValueId iv = body.args[0];
    std::vector<ValueId> carried(body.args.begin() + 1, body.args.end());
    for (size_t k = 0; k < carried.size(); ++k) {
      declare_var(carried[k]);
      assign(carried[k], name(carried[k]), op.operands[3 + k]);
    }
    const std::string it = type_str(f_.type(iv));
    const Pipeline pipe = pipeline_plan(op);
    const std::string rd = fresh("_rd"), wr = fresh("_wr");
    const std::string lb = expr(op.operands[0], {}), step = expr(op.operands[2], {});
    // tiles requested ahead
    const int64_t ahead = pipe.async_mma && !pipe.late_request ? pipe.stages - 2 : pipe.stages - 1;
    if (!pipe.loads.empty()) {
      for (const Staged& s : pipe.loads) {
        smem_ = (smem_ + s.tile.align() - 1) / s.tile.align() * s.tile.align();
        const std::string ct = storage_type(f_.type(s.load).elem);
        line(ct + "* const " + s.ring + " = (" + ct + "*)(_smem + " + std::to_string(smem_) + ");");
        smem_ += pipe.slots() * s.tile.elems() * s.bytes;
      }
      hoist_run_bases(op, pipe);
      for (int64_t k = 0; k < ahead; ++k) {
        request_stage(op, pipe,
                      "(" + it + ")(" + lb + " + " + std::to_string(k) + " * " + step + ")",
                      std::to_string(k));
      }
      line("int32_t " + rd + " = 0, " + wr + " = " + std::to_string(ahead) + ";");
    }
    if (const int u = ir::LoopOptions::unpack(op.ival).loop_unroll_factor; u > 1)
      line("#pragma unroll " + std::to_string(u));
    line("for (" + it + " " + name(iv) + " = " + lb + "; " + name(iv) + " < " +
         expr(op.operands[1], {}) + "; " + name(iv) + " += " + step + ") {");
    ++indent_;
    ++loop_depth_;
    const std::string next =
        "(" + it + ")(" + name(iv) + " + " + std::to_string(ahead) + " * " + step + ")";
    if (pipe.async_mma) {
      // This iteration's tiles landed (this thread's copies), fenced for wgmma's reads, the
      // block synchronized (so every warpgroup's products from two iterations back are done:
      // their slot is the one requested next, unless the request comes late).
      line("trt::cp_async_wait<" + std::to_string(ahead - 1) + ">();");
      line("trt::fence_async_shared();");
      line("__syncthreads();");
      if (!pipe.late_request) request_stage(op, pipe, next, wr);
    } else if (!pipe.loads.empty()) {
      // This iteration's tiles landed (this thread's copies: the groups of the next ahead - 1
      // iterations may still be in flight), the block synchronized, then the next request: its
      // slot is iteration i - 1's, whose products every warp finished before the barrier
      // (mma.sync reads its tiles synchronously, wgmma_now waits for its products). So this one
      // barrier also stands for the one a loop body's last dot would need before the slot is
      // rewritten: one barrier an iteration. (TESSERA_CUDA_RING_REQUEST_FIRST: the request
      // first, one more group in flight at the wait, and the last dot's barrier kept.)
      const bool first = knobs().cuda_ring_request_first;
      if (first) request_stage(op, pipe, next, wr);
      line("trt::cp_async_wait<" + std::to_string(first ? ahead : ahead - 1) + ">();");
      // Tiles a wgmma reads: fenced here once, so that the dots need no barrier of their own.
      if (pipe.wgmma) line("trt::fence_async_shared();");
      line("__syncthreads();");
      if (!first) request_stage(op, pipe, next, wr);
    }
    for (const Staged& s : pipe.loads) {
      staged_[s.load] = "(" + s.ring + " + " + rd + " * " + std::to_string(s.tile.elems()) + ")";
      if (pipe.async_mma || pipe.wgmma) visible_.insert(s.load);
    }
    const bool outer_async = async_mma_;
    const Region* outer_body = for_body_;
    const Region* outer_ring = ring_body_;
    async_mma_ = pipe.async_mma;
    const Op* outer_defer = defer_dot_;
    const Op* outer_defer_mul = defer_mul_;
    const ValueId outer_defer_acc = defer_acc_;
    defer_dot_ = pipe.defer_dot;
    defer_mul_ = pipe.defer_mul;
    defer_acc_ = pipe.defer_acc;
    for_body_ = &body;
    const bool ring = !pipe.loads.empty() && !pipe.async_mma && !knobs().cuda_ring_request_first;
    ring_body_ = ring ? &body : nullptr;
    region(body);
    async_mma_ = outer_async;
    defer_dot_ = outer_defer;
    defer_mul_ = outer_defer_mul;
    defer_acc_ = outer_defer_acc;
    for_body_ = outer_body;
    ring_body_ = outer_ring;
    if (pipe.late_request) {  // every warpgroup waited for iteration i - 1's products
      line("__syncthreads();");
      request_stage(op, pipe, next, wr);
    }
    for (const Staged& s : pipe.loads) {
      staged_.erase(s.load);
      visible_.erase(s.load);
      run_bases_.erase(f_.def(s.load));
    }
    if (!pipe.loads.empty()) {
      const std::string S = std::to_string(pipe.slots());
      line(rd + " = " + rd + " + 1 == " + S + " ? 0 : " + rd + " + 1;");
      line(wr + " = " + wr + " + 1 == " + S + " ? 0 : " + wr + " + 1;");
    }
    parallel_assign(carried, body.ops.back()->operands);
    --loop_depth_;
    --indent_;
    line("}");
    if (pipe.async_mma) line("trt::wgmma_wait<0>();");  // the last iteration's products
    if (pipe.defer_dot) {  // the last iteration's deferred products, pinned before any read
      line("trt::wgmma_wait<0>();");
      line("trt::wgmma_fence_operands<" + std::to_string(regs_of(pipe.defer_acc)) + ">(" +
           name(pipe.defer_acc) + ");");
    }
    if (!pipe.loads.empty()) line("trt::cp_async_wait<0>();");  // (the requests past the end)
    // (the last iteration's dots kept no trailing barrier: the tiles they read are done with
    // before shared memory is used after the loop)
    if (ring) line("__syncthreads();");
    for (size_t k = 0; k < op.results.size(); ++k) alias(op.results[k], carried[k]);
  }

  void while_op(const Op& op) {
    const Region &cond = op.regions[0], &body = op.regions[1];
    const std::vector<ValueId> carried(body.args.begin(), body.args.end());
    for (size_t k = 0; k < carried.size(); ++k) {
      declare_var(carried[k]);
      assign(carried[k], name(carried[k]), op.operands[k]);
    }
    line("for (;;) {");
    ++indent_;
    ++loop_depth_;
    for (size_t k = 0; k < carried.size(); ++k) alias(cond.args[k], carried[k]);
    region(cond);
    line("if (!(" + expr(cond.ops.back()->operands[0], {}) + ")) break;");
    region(body);
    parallel_assign(carried, body.ops.back()->operands);
    --loop_depth_;
    --indent_;
    line("}");
    for (size_t k = 0; k < op.results.size(); ++k) alias(op.results[k], carried[k]);
  }

  void if_op(const Op& op) {
    for (ValueId r : op.results) declare_var(r);
    line("if (" + expr(op.operands[0], {}) + ") {");
    for (int b = 0; b < 2; ++b) {
      if (b == 1) line("} else {");
      ++indent_;
      const Region& reg = op.regions[static_cast<size_t>(b)];
      region(reg);
      parallel_assign(op.results, reg.ops.back()->operands);
      --indent_;
    }
    line("}");
  }

  // The specializations of trt::wgmma_op (and wgmma_op_rs) the kernel calls: the instruction with
  // its N / 2 accumulator registers, A from a descriptor (K-major) or four registers, B N-major
  // (imm-trans-b 1) or K-major (0); or the simulator's.
  std::string wgmma_definitions() const {
    std::string out = "namespace trt {\n";
    for (const auto& [n, bf16, kb, rs] : wgmma_ops_) {
      const std::string ty = bf16 ? "bf16" : "f16", N = std::to_string(n);
      const std::string flags =
          std::string(bf16 ? "true" : "false") + ", " + (kb ? "true" : "false");
      // Operands: the n / 2 accumulators, A (four registers or a descriptor), B's descriptor,
      // the scale-d predicate.
      const int64_t a = n / 2, b = a + (rs ? 4 : 1), pred = b + 1;
      out += "template <>\nTRT_INLINE void " + std::string(rs ? "wgmma_op_rs<" : "wgmma_op<") + N +
             ", " + flags + ">(float* d, " + (rs ? "const uint32_t* a" : "uint64_t a") +
             ", uint64_t b) {\n#if defined(TRT_SIM)\n  trt_sim::" + (rs ? "wgmma_rs" : "wgmma") +
             "(d, " + N + ", a, b, " + flags +
             ");\n#else\n  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" +
             std::to_string(pred) + ", 0;\\nwgmma.mma_async.sync.aligned.m64n" + N + "k16.f32." +
             ty + "." + ty + " {";
      for (int64_t i = 0; i < n / 2; ++i) out += (i ? ", %" : "%") + std::to_string(i);
      out += "}, ";
      if (rs) {  // (no transpose flag for A in registers)
        out += "{%" + std::to_string(a) + ", %" + std::to_string(a + 1) + ", %" +
               std::to_string(a + 2) + ", %" + std::to_string(a + 3) + "}, %" + std::to_string(b) +
               ", p, 1, 1, " + (kb ? "0" : "1");
      } else {
        out += "%" + std::to_string(a) + ", %" + std::to_string(b) + ", p, 1, 1, 0, " +
               (kb ? "0" : "1");
      }
      out += ";\\n}\\n\"\n      : ";
      for (int64_t i = 0; i < n / 2; ++i)
        out += (i ? ", " : "") + std::string("\"+f\"(d[") + std::to_string(i) + "])";
      out +=
          rs ? "\n      : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(b), \"r\"(1));"
             : "\n      : \"l\"(a), \"l\"(b), \"r\"(1));";
      out += "\n#endif\n}\n";
    }
    return out + "}  // namespace trt\n\n";
  }

  const int64_t max_shared_;
  const int arch_;  // the target's sm_ number; 0: none in particular (sm_80's instructions)
  // The wgmma_op<N, BF16, KB> (or, A from registers, wgmma_op_rs) it calls: N, BF16, KB, rs.
  std::set<std::tuple<int64_t, bool, bool, bool>> wgmma_ops_;
  // the body of the innermost loop with a ring of tiles not overlapping its wgmma (Pipeline): its
  // iterations start with a barrier
  const Region* ring_body_ = nullptr;
  bool async_mma_ = false;  // in a loop whose wgmma overlaps the next iteration (Pipeline)
  const Region* for_body_ = nullptr;     // the innermost tl::range loop's body being emitted
  std::map<ValueId, ValueId> in_place_;  // dot result -> the carried value it accumulated into
  // The loop being emitted's deferred dot, its multiply and carried accumulator (Pipeline).
  const Op* defer_dot_ = nullptr;
  const Op* defer_mul_ = nullptr;
  ValueId defer_acc_ = 0;
  int threads_ = 128;
  int64_t smem_ = 0;
  int loop_depth_ = 0;  // enclosing tl::range / tl::while_ loops

  // Register arrays (see plan_registers).
  // Words per thread for register arrays: 160 in kernels with tensor-core tiles and blocks of up
  // to 8 warps (255 registers a thread are the hardware's limit: the rest for addresses, indices
  // and scalars; attention at D = 128 holds a 128-word accumulator beside its scores), else 128
  // (a block of 16 warps has 128 registers a thread; memory-bound kernels keep the budget their
  // measured occupancy comes from).
  int64_t register_budget() const { return !mma_.empty() && threads_ <= 256 ? 160 : 128; }
  std::vector<char> reg_;               // per value: kept in registers
  std::vector<int8_t> packed_memo_;     // packed(v), -1 for not yet known
  std::vector<int8_t> same_elem_memo_;  // same_element, -1 for not yet known
  std::vector<char> mma_operand_;       // per value: a load only a tensor-core dot reads (inline)
  // The register budget's program positions (number_ops) and the words live at each.
  int positions_ = 0;
  std::unordered_map<const Op*, std::pair<int, int>> span_;
  std::unordered_map<const Op*, const Region*> parent_;
  std::unordered_map<const Region*, const Op*> owner_;
  std::vector<int64_t> live_words_;
  int64_t total_words_ = 0;  // (kernels without tensor-core tiles: every array counted)
  struct ElementLoop {
    SmallVector<int64_t, 4> shape;
    Index idx;         // the element's index variables
    std::string slot;  // the element's position in a register array (the unrolled counter)
    bool mma = false;  // the shape's Mma layout gives the elements (a row-slice array's rows)
  };
  bool runs_mma_ = false;  // runs() is giving an Mma-layout shape's elements in that layout
  std::vector<ElementLoop> elem_loops_;
  bool touched_registers_ = false;    // the loop being generated read or wrote a register array
  bool read_shared_ = false;          // ... read an array in shared memory
  std::vector<PendingLoad> pending_;  // loads whose second pass waits (vector_load)
  int branched_ = 0;                  // inside a versioned access's blocks
  // Vector accesses (see plan_vectors).
  ir::AffineInfo affine_;
  ir::AffineInfo affine_rem_;             // the forms with `x % m` as x (versioned_access)
  const ir::AffineInfo* aff_ = &affine_;  // the forms of the code being written
  std::vector<const Op*> rem_identity_;   // ... and the `%` it writes as their left operand
  std::vector<std::pair<SmallVector<int64_t, 4>, int64_t>> vec_;  // shape -> run length
  std::vector<MmaLayout> mma_;                      // shapes in the Mma layout (see plan_mma)
  std::vector<std::pair<int64_t, size_t>> slices_;  // [M] in the row-slice layout of mma_[i]
  // A dot operand load already in its shared-memory tile -> where (a pipeline's current ring
  // slot, or a tile copied once outside the loop)
  std::map<ValueId, std::string> staged_;
  // Staged operand tiles fenced for wgmma's reads (the async proxy) with the block synchronized
  // after: a hoisted loop-invariant tile, a pipelined loop's ring in its body.
  std::set<ValueId> visible_;
  std::map<const Op*, RunBases> run_bases_;  // pipelined loads' hoisted run addresses
  const Region* region_ = nullptr;           // the region being emitted
};

}  // namespace

Emitted emit(const ir::Function& f, int64_t max_shared_bytes, bool checked, int arch) {
  return Emitter(f, max_shared_bytes, checked, arch).run();
}

std::string entry_name(const std::string& kernel_name) {
  // C++ keywords a kernel defined from Python could be named (C++ TL_JIT names cannot be), and
  // the names the kernel body calls unqualified.
  static const std::string kKeywords =
      " alignas alignof and asm auto bool break case catch char class const consteval constexpr"
      " constinit const_cast continue decltype default delete do double else enum explicit"
      " export extern false float for friend goto if inline int long mutable namespace new"
      " noexcept not nullptr operator or private protected public register requires return"
      " short signed sizeof static struct switch template this throw true try typedef typeid"
      " typename union unsigned using virtual void volatile while xor static_assert static_cast"
      " dynamic_cast reinterpret_cast thread_local wchar_t char8_t char16_t char32_t co_await"
      " co_return co_yield concept bitand bitor compl not_eq or_eq xor_eq and_eq trt tessera"
      " printf main"
      " ";
  std::string n;
  for (char c : kernel_name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    n += ok ? c : '_';
  }
  if (n.empty() || (n[0] >= '0' && n[0] <= '9') || n[0] == '_') n = "k" + n;
  if (kKeywords.find(" " + n + " ") != std::string::npos) return n + "_kernel";
  return n;
}

std::string entry_symbol(const std::string& kernel_name) {
  // Itanium C++ ABI: `void tessera::NAME(trt::Grid, _Slots)` (top-level const is not part of
  // the signature).
  const std::string n = entry_name(kernel_name);
  return "_ZN7tessera" + std::to_string(n.size()) + n + "EN3trt4GridE6_Slots";
}

std::string with_extern_entry(const std::string& source, const std::string& kernel_name,
                              const std::string& symbol) {
  std::string src = source;
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = src.find(from);
    TS_INTERNAL_ASSERT(at != std::string::npos)
        << "[kernel " << kernel_name << "] no '" << from << "' in its CUDA code";
    src.replace(at, from.size(), to);
  };
  replace("namespace tessera {\n__global__ void", "extern \"C\" __global__ void");
  replace(") " + entry_name(kernel_name) + "(const trt::Grid _gv",
          ") " + symbol + "(const trt::Grid _gv");
  replace("}  // namespace tessera\n", "");
  return src;
}

}  // namespace tessera::backend::cuda
