// Block pointers and tensor descriptors (Triton's `tl.make_block_ptr` and
// `tl.make_tensor_descriptor`): sugar over pointer tiles and masks, built from the language's own
// operations, so every backend runs them as it runs the equivalent hand-written kernel.
#include <algorithm>
#include <cmath>
#include <string>

#include "tessera/tl.h"
#include "tl/trace.h"

namespace tessera::tl {

struct BlockPtrAccess {
  static BlockPtr make() { return BlockPtr(); }
  static std::vector<std::unique_ptr<Var>>& parts(BlockPtr& p) { return p.parts_; }
  static std::vector<int64_t>& block(BlockPtr& p) { return p.block_; }
  static std::vector<int>& order(BlockPtr& p) { return p.order_; }
  static TensorDescriptor descriptor() { return TensorDescriptor(); }
  static Tile& base(TensorDescriptor& d) { return d.base_; }
  static std::vector<Tile>& shape(TensorDescriptor& d) { return d.shape_; }
  static std::vector<Tile>& strides(TensorDescriptor& d) { return d.strides_; }
  static std::vector<int64_t>& block(TensorDescriptor& d) { return d.block_; }
  static bool& nan_padding(TensorDescriptor& d) { return d.nan_padding_; }
};

namespace {

TraceContext& ctx(SourceLoc loc) {
  TraceContext& c = TraceContext::current(loc);
  c.at(loc);
  return c;
}

std::string dims_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// An integer scalar operand (a shape, stride or offset) of `what`.
Tile int_scalar(TraceContext& c, const Operand& o, const char* what, SourceLoc loc) {
  const Tile t = o.tile;
  if (t.is_ptr() || t.rank() != 0 || !(is_integral(t.dtype()) && t.dtype() != DType::Bool)) {
    c.fail(loc, std::string(what) + " must be integer scalars");
  }
  return t;
}

void check_block(TraceContext& c, const std::vector<int64_t>& block, const char* what,
                 SourceLoc loc) {
  for (int64_t b : block) {
    if (b <= 0 || (b & (b - 1)) != 0)
      c.fail(loc, std::string(what) + "'s block shape " + dims_str(block) +
                      " must have powers of 2 (as tl::arange)");
  }
}

struct Window {
  Tile ptrs;                 // a pointer per element of the block
  std::optional<Tile> mask;  // the checked dimensions' bounds
};

// The addresses of a `block` window at `offsets` (and the bounds mask of the dimensions in
// `checked`): base + sum over d of (offset[d] + arange(0, block[d])) * stride[d], each term
// shaped to broadcast along its own dimension.
Window window(const Tile& base, const std::vector<Tile>& shape, const std::vector<Tile>& strides,
              const std::vector<Tile>& offsets, const std::vector<int64_t>& block,
              const std::vector<bool>& checked, SourceLoc loc) {
  const int64_t r = static_cast<int64_t>(block.size());
  Window w{base, std::nullopt};
  for (int64_t d = 0; d < r; ++d) {
    Tile idx = Operand(offsets[d], loc) + Operand(arange(0, block[d], loc), loc);
    for (int64_t k = 0; k < d; ++k) idx = expand_dims(idx, 0, loc);
    for (int64_t k = d + 1; k < r; ++k) idx = expand_dims(idx, -1, loc);
    w.ptrs = Operand(w.ptrs, loc) + Operand(Operand(idx, loc) * Operand(strides[d], loc), loc);
    if (!checked[d]) continue;
    Tile in = Operand(Operand(idx, loc) >= Operand(0, loc), loc) &
              Operand(Operand(idx, loc) < Operand(shape[d], loc), loc);
    w.mask = w.mask ? Tile(Operand(*w.mask, loc) & Operand(in, loc)) : in;
  }
  return w;  // every dimension contributed a term: the pointers have the block's shape
}

std::vector<bool> checked_dims(TraceContext& c, std::initializer_list<int> dims, int64_t rank,
                               SourceLoc loc) {
  std::vector<bool> out(static_cast<size_t>(rank), false);
  for (int d : dims) {
    if (d < 0 || d >= rank)
      c.fail(loc, "boundary_check dimension " + std::to_string(d) + " is out of range for a " +
                      std::to_string(rank) + "-d block pointer");
    if (out[static_cast<size_t>(d)])
      c.fail(loc, "boundary_check lists dimension " + std::to_string(d) + " twice");
    out[static_cast<size_t>(d)] = true;
  }
  return out;
}

// The value masked-off elements read: 0, or NaN ("nan", floating types only).
Operand padding(TraceContext& c, DType dtype, bool nan, SourceLoc loc) {
  if (!nan) return Operand(0, loc);
  if (!is_floating_point(dtype))
    c.fail(loc, std::string("padding_option \"nan\" needs a floating element type, got ") +
                    dtype_name(dtype));
  return Operand(NAN, loc);
}

bool nan_padding(TraceContext& c, std::string_view option, SourceLoc loc) {
  if (option == "nan") return true;
  if (option.empty() || option == "zero") return false;
  c.fail(loc, "padding_option must be \"zero\" or \"nan\", got \"" + std::string(option) + "\"");
}

Tile load_window(const Window& w, const Operand& other, SourceLoc loc) {
  return w.mask ? load(Operand(w.ptrs, loc), Operand(*w.mask, loc), other, loc)
                : load(Operand(w.ptrs, loc), loc);
}

void store_window(TraceContext& c, const Window& w, const std::vector<int64_t>& block,
                  const Operand& value, const char* what, SourceLoc loc) {
  const Tile v = value.tile;
  if (v.rank() != 0 && v.shape() != block)
    c.fail(loc, std::string(what) + " stores a block of shape " + dims_str(block) +
                    ", got a value of shape " + dims_str(v.shape()));
  if (w.mask) {
    store(Operand(w.ptrs, loc), value, Operand(*w.mask, loc), loc);
  } else {
    store(Operand(w.ptrs, loc), value, loc);
  }
}

}  // namespace

// ---- block pointers
// -------------------------------------------------------------------------------

BlockPtr::BlockPtr(BlockPtr&&) noexcept = default;
BlockPtr::~BlockPtr() = default;

DType BlockPtr::dtype() const {
  return base().dtype();
}
Tile BlockPtr::base() const {
  return parts_.at(0)->get();
}
Tile BlockPtr::shape(int64_t d) const {
  return parts_.at(static_cast<size_t>(1 + d))->get();
}
Tile BlockPtr::stride(int64_t d) const {
  return parts_.at(static_cast<size_t>(1 + rank() + d))->get();
}
Tile BlockPtr::offset(int64_t d) const {
  return parts_.at(static_cast<size_t>(1 + 2 * rank() + d))->get();
}

BlockPtr& BlockPtr::operator=(const BlockPtr& o) {
  if (this == &o) return *this;
  TraceContext& c = ctx({});
  if (o.block_ != block_ || o.dtype() != dtype()) {
    c.fail(c.loc(), "a block pointer of block " + dims_str(block_) + " (" + dtype_name(dtype()) +
                        ") assigned one of block " + dims_str(o.block_) + " (" +
                        dtype_name(o.dtype()) + ")");
  }
  for (size_t i = 0; i < parts_.size(); ++i) {
    const Tile now = parts_[i]->get(), next = o.parts_[i]->get();
    if (now.id() != next.id()) *parts_[i] = next;
  }
  return *this;
}

BlockPtr make_block_ptr(Operand base, std::initializer_list<Operand> shape,
                        std::initializer_list<Operand> strides,
                        std::initializer_list<Operand> offsets,
                        std::initializer_list<int64_t> block_shape,
                        std::initializer_list<int> order, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const Tile b = base.tile;
  if (!b.is_ptr() || b.rank() != 0)
    c.fail(loc, "tl::make_block_ptr's base must be a pointer (a scalar), got a " +
                    std::string(b.is_ptr() ? "tile of pointers" : "value"));
  const std::vector<int64_t> block(block_shape);
  const size_t r = block.size();
  if (r == 0) c.fail(loc, "tl::make_block_ptr needs at least one dimension");
  if (shape.size() != r || strides.size() != r || offsets.size() != r || order.size() != r) {
    c.fail(loc,
           "tl::make_block_ptr's shape, strides, offsets and order need one entry per "
           "dimension of block_shape " +
               dims_str(block) + " (got " + std::to_string(shape.size()) + ", " +
               std::to_string(strides.size()) + ", " + std::to_string(offsets.size()) + " and " +
               std::to_string(order.size()) + ")");
  }
  check_block(c, block, "tl::make_block_ptr", loc);
  std::vector<int> ord(order);
  std::vector<int> sorted = ord;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < r; ++i) {
    if (sorted[i] != static_cast<int>(i))
      c.fail(loc, "tl::make_block_ptr's order must be a permutation of the dimensions 0.." +
                      std::to_string(r - 1));
  }
  BlockPtr p = BlockPtrAccess::make();
  auto& parts = BlockPtrAccess::parts(p);
  parts.push_back(std::make_unique<Var>(Operand(b, loc)));
  for (const auto* list : {&shape, &strides, &offsets}) {
    for (const Operand& o : *list) {
      parts.push_back(std::make_unique<Var>(
          Operand(int_scalar(c, o, "tl::make_block_ptr's shape, strides and offsets", loc), loc)));
    }
  }
  BlockPtrAccess::block(p) = block;
  BlockPtrAccess::order(p) = ord;
  return p;
}

BlockPtr advance(const BlockPtr& p, std::initializer_list<Operand> offsets, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const int64_t r = p.rank();
  if (static_cast<int64_t>(offsets.size()) != r)
    c.fail(loc, "tl::advance needs one offset per dimension of the " + std::to_string(r) +
                    "-d block pointer, got " + std::to_string(offsets.size()));
  BlockPtr q = BlockPtrAccess::make();
  auto& parts = BlockPtrAccess::parts(q);
  parts.push_back(std::make_unique<Var>(Operand(p.base(), loc)));
  for (int64_t d = 0; d < r; ++d) parts.push_back(std::make_unique<Var>(Operand(p.shape(d), loc)));
  for (int64_t d = 0; d < r; ++d) parts.push_back(std::make_unique<Var>(Operand(p.stride(d), loc)));
  int64_t d = 0;
  for (const Operand& o : offsets) {
    const Tile step = int_scalar(c, o, "tl::advance's offsets", loc);
    // The offset keeps its type (a loop-carried block pointer's parts keep theirs).
    const Tile cur = p.offset(d);
    Tile next = Operand(cur, loc) + Operand(step, loc);
    if (next.dtype() != cur.dtype()) next = next.to(cur.dtype(), loc);
    parts.push_back(std::make_unique<Var>(Operand(next, loc)));
    ++d;
  }
  BlockPtrAccess::block(q) = p.block_shape();
  BlockPtrAccess::order(q) = p.order();
  return q;
}

namespace {
struct Parts {
  std::vector<Tile> shape, strides, offsets;
};
Parts parts_of(const BlockPtr& p) {
  Parts out;
  for (int64_t d = 0; d < p.rank(); ++d) {
    out.shape.push_back(p.shape(d));
    out.strides.push_back(p.stride(d));
    out.offsets.push_back(p.offset(d));
  }
  return out;
}
}  // namespace

Tile load(const BlockPtr& p, std::initializer_list<int> boundary_check,
          std::string_view padding_option, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const auto checked = checked_dims(c, boundary_check, p.rank(), loc);
  const bool nan = nan_padding(c, padding_option, loc);
  const Parts q = parts_of(p);
  const Window w = window(p.base(), q.shape, q.strides, q.offsets, p.block_shape(), checked, loc);
  return load_window(w, padding(c, p.dtype(), nan, loc), loc);
}

void store(const BlockPtr& p, Operand value, std::initializer_list<int> boundary_check,
           SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const auto checked = checked_dims(c, boundary_check, p.rank(), loc);
  const Parts q = parts_of(p);
  const Window w = window(p.base(), q.shape, q.strides, q.offsets, p.block_shape(), checked, loc);
  store_window(c, w, p.block_shape(), value, "tl::store through a block pointer", loc);
}

// ---- tensor descriptors
// ---------------------------------------------------------------------------

TensorDescriptor make_tensor_descriptor(Operand base, std::initializer_list<Operand> shape,
                                        std::initializer_list<Operand> strides,
                                        std::initializer_list<int64_t> block_shape,
                                        std::string_view padding_option, SourceLoc loc) {
  TraceContext& c = ctx(loc);
  const Tile b = base.tile;
  if (!b.is_ptr() || b.rank() != 0)
    c.fail(loc, "tl::make_tensor_descriptor's base must be a pointer (a scalar)");
  const std::vector<int64_t> block(block_shape);
  const size_t r = block.size();
  if (r < 1 || r > 5)
    c.fail(loc, "tl::make_tensor_descriptor supports 1 to 5 dimensions, got block_shape " +
                    dims_str(block));
  if (shape.size() != r || strides.size() != r)
    c.fail(loc,
           "tl::make_tensor_descriptor's shape and strides need one entry per dimension of "
           "block_shape " +
               dims_str(block));
  check_block(c, block, "tl::make_tensor_descriptor", loc);
  TensorDescriptor d = BlockPtrAccess::descriptor();
  BlockPtrAccess::base(d) = b;
  for (const Operand& o : shape)
    BlockPtrAccess::shape(d).push_back(int_scalar(c, o, "a tensor descriptor's shape", loc));
  for (const Operand& o : strides)
    BlockPtrAccess::strides(d).push_back(int_scalar(c, o, "a tensor descriptor's strides", loc));
  BlockPtrAccess::block(d) = block;
  BlockPtrAccess::nan_padding(d) = nan_padding(c, padding_option, loc);
  (void)padding(c, b.dtype(), BlockPtrAccess::nan_padding(d), loc);
  // TMA's rules: a contiguous last dimension, a 16-byte aligned base, leading strides of whole
  // 16-byte units. A constant stride is checked now; the rest by the checked mode.
  const Tile last = BlockPtrAccess::strides(d).back();
  if (last.is_constant() && last.int_value(loc) != 1)
    c.fail(loc, "a tensor descriptor's last dimension must be contiguous (stride 1), got stride " +
                    std::to_string(last.int_value(loc)));
  if (!last.is_constant())
    device_assert(Operand(last, loc) == Operand(1, loc),
                  "a tensor descriptor's last stride must be 1", loc);
  const int64_t bytes = static_cast<int64_t>(itemsize(b.dtype()));
  device_assert(
      Operand(Operand(b.to(DType::Int64, loc), loc) % Operand(16, loc), loc) == Operand(0, loc),
      "a tensor descriptor's base must be 16-byte aligned", loc);
  for (size_t i = 0; i + 1 < r; ++i) {
    const Tile s = BlockPtrAccess::strides(d)[i];
    device_assert(Operand(Operand(Operand(s, loc) * Operand(bytes, loc), loc) % Operand(16, loc),
                          loc) == Operand(0, loc),
                  "a tensor descriptor's leading strides must be multiples of 16 bytes", loc);
  }
  return d;
}

namespace {
// The window of a descriptor's block at `offsets` (one per dimension), every dimension checked.
Window descriptor_window(TraceContext& c, const char* what, std::initializer_list<Operand> offsets,
                         const Tile& base, const std::vector<Tile>& shape,
                         const std::vector<Tile>& strides, const std::vector<int64_t>& block,
                         SourceLoc loc) {
  if (offsets.size() != block.size())
    c.fail(loc, std::string("a tensor descriptor's ") + what + " needs one offset per dimension (" +
                    std::to_string(block.size()) + "), got " + std::to_string(offsets.size()));
  std::vector<Tile> offs;
  for (const Operand& o : offsets) offs.push_back(int_scalar(c, o, "a descriptor's offsets", loc));
  return window(base, shape, strides, offs, block, std::vector<bool>(block.size(), true), loc);
}
}  // namespace

Tile TensorDescriptor::load(std::initializer_list<Operand> offsets, SourceLoc loc) const {
  TraceContext& c = ctx(loc);
  const Window w = descriptor_window(c, "load", offsets, base_, shape_, strides_, block_, loc);
  return load_window(w, padding(c, dtype(), nan_padding_, loc), loc);
}

void TensorDescriptor::store(std::initializer_list<Operand> offsets, Operand value,
                             SourceLoc loc) const {
  TraceContext& c = ctx(loc);
  const Window w = descriptor_window(c, "store", offsets, base_, shape_, strides_, block_, loc);
  store_window(c, w, block_, value, "a tensor descriptor's store", loc);
}

}  // namespace tessera::tl
