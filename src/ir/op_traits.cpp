#include "ir/op_traits.h"

namespace tessera::ir {
namespace {

constexpr uint16_t kValue = kPure | kCheap;  // a pure op an emitter recomputes per element
constexpr uint16_t kMap = kValue | kElementwise;
constexpr uint16_t kView = kValue | kViewLike;

// In OpKind's order (checked below).
constexpr OpTraits kOps[] = {
    {OpKind::Constant, "const", 0, 0, 0, kValue, 0},
    {OpKind::ProgramId, "program_id", 0, 0, 0, kValue, 0},
    {OpKind::NumPrograms, "num_programs", 0, 0, 0, kValue, 0},
    {OpKind::Arange, "arange", 0, 0, 0, kValue, 0},
    {OpKind::Splat, "splat", 1, 1, 0, kView, 0},
    {OpKind::Broadcast, "broadcast", 1, 1, 0, kView, 0},
    {OpKind::ExpandDims, "expand_dims", 1, 1, 0, kView, 0},
    {OpKind::Binary, "binary", 2, 2, 0, kMap, 1},
    {OpKind::Compare, "cmp", 2, 2, 0, kMap, 0},
    {OpKind::Unary, "unary", 1, 1, 0, kPure | kElementwise, -1},
    {OpKind::Cast, "cast", 1, 1, 0, kMap, 0},
    {OpKind::Select, "select", 3, 3, 0, kMap, 0},
    {OpKind::AddPtr, "addptr", 2, 2, 0, kMap, 0},
    {OpKind::Load, "load", 1, 3, 0, kReadsMemory | kElementwise, 0},
    {OpKind::Store, "store", 2, 3, 0, kWritesMemory | kSideEffects, 0},
    {OpKind::Reduce, "reduce", 1, 1, 0, kPure, -1},
    {OpKind::For, "for", 3, -1, 1, 0, 0},
    {OpKind::If, "if", 1, 1, 2, 0, 0},
    {OpKind::Yield, "yield", 0, -1, 0, kTerminator, 0},
    {OpKind::Fma, "fma", 3, 3, 0, kMap, 2},
    {OpKind::Dot, "dot", 3, 3, 0, kPure, -1},
    {OpKind::Atomic, "atomic", 2, 3, 0, kReadsMemory | kWritesMemory | kSideEffects, 0},
    {OpKind::AtomicCas, "atomic_cas", 3, 3, 0, kReadsMemory | kWritesMemory | kSideEffects, 0},
    {OpKind::While, "while", 0, -1, 2, 0, 0},
    {OpKind::Permute, "permute", 1, 1, 0, kView, 0},
    {OpKind::Reshape, "reshape", 1, 1, 0, kView, 0},
    {OpKind::Join, "join", 2, 2, 0, kView, 0},
    {OpKind::Extract, "extract", 1, 1, 0, kView, 0},
    {OpKind::Cat, "cat", 2, 2, 0, kView, 0},
    {OpKind::Flip, "flip", 1, 1, 0, kView, 0},
    {OpKind::Gather, "gather", 2, 2, 0, kPure, 0},
    {OpKind::Bitcast, "bitcast", 1, 1, 0, kMap, 0},
    {OpKind::Extern, "extern", 1, -1, 0, kPure | kElementwise, 0},
    {OpKind::ReduceFn, "reduce_fn", 1, -1, 1, 0, 0},
    {OpKind::ScanFn, "scan_fn", 1, -1, 1, 0, 0},
    {OpKind::Assert, "assert", 1, 1, 0, kSideEffects, 0},
    {OpKind::Print, "print", 0, -1, 0, kSideEffects, 0},
};

constexpr UnaryTraits kUnary[] = {{UnaryKind::Neg, "neg", true, true, nullptr, 0},
                                  {UnaryKind::Not, "not", true, true, nullptr, 0},
                                  {UnaryKind::Abs, "abs", true, true, nullptr, 0},
#define TESSERA_IR_MATH_TRAITS(kind, fn) {UnaryKind::kind, #fn, false, false, #fn, 1},
                                  TESSERA_IR_MATH_FUNCTIONS(TESSERA_IR_MATH_TRAITS)
#undef TESSERA_IR_MATH_TRAITS
};

constexpr BinaryTraits kBinary[] = {{BinaryKind::Add, "add", true, true},
                                    {BinaryKind::Sub, "sub", true, true},
                                    {BinaryKind::Mul, "mul", true, true},
                                    {BinaryKind::Div, "div", true, true},
                                    {BinaryKind::Rem, "rem", true, true},
                                    {BinaryKind::Max, "max", true, true},
                                    {BinaryKind::Min, "min", true, true},
                                    {BinaryKind::And, "and", true, false},
                                    {BinaryKind::Or, "or", true, false},
                                    {BinaryKind::Xor, "xor", true, false},
                                    {BinaryKind::Shl, "shl", true, false},
                                    {BinaryKind::Shr, "shr", true, false},
                                    {BinaryKind::UMulHi, "umulhi", true, false},
                                    {BinaryKind::DivRn, "div_rn", false, true},
#define TESSERA_IR_MATH_BINARY_TRAITS(kind, fn) {BinaryKind::kind, #fn, false, true},
                                    TESSERA_IR_MATH_BINARY(TESSERA_IR_MATH_BINARY_TRAITS)
#undef TESSERA_IR_MATH_BINARY_TRAITS
};

constexpr ReduceTraits kReduce[] = {
    {ReduceKind::Sum, "sum", BinaryKind::Add, false},
    {ReduceKind::Max, "max", BinaryKind::Max, false},
    {ReduceKind::Min, "min", BinaryKind::Min, false},
    {ReduceKind::Xor, "xor", BinaryKind::Xor, false},
    {ReduceKind::ArgMax, "argmax", BinaryKind::Max, true},
    {ReduceKind::ArgMin, "argmin", BinaryKind::Min, true},
};

constexpr const char* kCmp[] = {"eq", "ne", "lt", "le", "gt", "ge"};

template <class T, size_t N>
constexpr bool in_order(const T (&table)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(table[i].kind) != i) return false;
  }
  return true;
}
static_assert(in_order(kOps) && static_cast<size_t>(OpKind::Print) + 1 == std::size(kOps),
              "kOps must list every OpKind in order");
static_assert(in_order(kUnary), "kUnary must list every UnaryKind in order");
static_assert(in_order(kBinary) &&
                  static_cast<size_t>(BinaryKind::FastDivide) + 1 == std::size(kBinary),
              "kBinary must list every BinaryKind in order");
static_assert(in_order(kReduce) &&
                  static_cast<size_t>(ReduceKind::ArgMin) + 1 == std::size(kReduce),
              "kReduce must list every ReduceKind in order");
static_assert(static_cast<size_t>(CmpKind::GE) + 1 == std::size(kCmp));

}  // namespace

const OpTraits& traits(OpKind k) {
  return kOps[static_cast<size_t>(k)];
}
int num_op_kinds() {
  return static_cast<int>(std::size(kOps));
}
const UnaryTraits& unary_traits(UnaryKind k) {
  return kUnary[static_cast<size_t>(k)];
}
int num_unary_kinds() {
  return static_cast<int>(std::size(kUnary));
}
const BinaryTraits& binary_traits(BinaryKind k) {
  return kBinary[static_cast<size_t>(k)];
}
int num_binary_kinds() {
  return static_cast<int>(std::size(kBinary));
}
const ReduceTraits& reduce_traits(ReduceKind k) {
  return kReduce[static_cast<size_t>(k)];
}
int num_reduce_kinds() {
  return static_cast<int>(std::size(kReduce));
}
int num_cmp_kinds() {
  return static_cast<int>(std::size(kCmp));
}

const char* op_name(OpKind k) {
  return traits(k).name;
}
const char* binary_name(BinaryKind k) {
  return binary_traits(k).name;
}
const char* cmp_name(CmpKind k) {
  return kCmp[static_cast<size_t>(k)];
}
const char* unary_name(UnaryKind k) {
  return unary_traits(k).name;
}
const char* reduce_name(ReduceKind k) {
  return reduce_traits(k).name;
}

}  // namespace tessera::ir
