// The tile IR's text form: every op prints and parses back to an equal function (kernels that
// use all of them are traced for real), parse errors name the line and column, and passes are
// tested as text in, text out.
#include <gtest/gtest.h>

#include <set>

#include "ir/op_traits.h"
#include "ir/passes.h"
#include "ir/text.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "testing.h"
#include "tl/jit.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

// Elementwise, casts, selects, math, pointers, the program grid.
TL_JIT(text_pointwise, tl::Ptr x, tl::Ptr y, tl::Ptr out, tl::Int n, tl::Float s, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto a = tl::load(x + offs, m, 0.0f);
  auto b = tl::load(y + offs, m);
  auto c = tl::where(a > b, tl::exp(a) * s, -b) + tl::fma(a, b, a);
  auto w = c.to(tl::float16).to(tl::float32) + tl::num_programs(0).to(tl::float32);
  auto row = tl::expand_dims(w, 0);  // [1, BLOCK]
  tl::store(out + offs, tl::sum(tl::broadcast_to(row, {2, BLOCK}), 0) / 2.0f, m);
}

// Loops, branches, while, atomics, asserts and prints.
tl::RangeOptions loop_options() {
  tl::RangeOptions o;
  o.num_stages = 3;
  o.loop_unroll_factor = 2;
  o.flatten = true;
  o.warp_specialize = true;
  o.disallow_acc_multi_buffer = true;
  return o;
}

TL_JIT(text_control, tl::Ptr x, tl::Ptr counter, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::arange(0, BLOCK);
  tl::Var acc = tl::zeros({BLOCK}, tl::float32);
  tl::range(
      0, n, BLOCK, [&](tl::Tile k) { acc = acc + tl::load(x + k + offs, k + offs < n, 0.0f); },
      loop_options());
  tl::if_(
      n > 100, [&] { acc = acc * 2.0f; }, [&] { acc = acc + 1.0f; });
  tl::Var i = 0;
  tl::while_([&] { return tl::Tile(i) < 3; }, [&] { i = i + 1; });
  tl::device_assert(tl::Tile(i) == 3, "three \"steps\"");
  (void)tl::atomic_add(counter, tl::Tile(i), std::nullopt, {.sem = "relaxed"});
  (void)tl::atomic_cas(counter + 1, 0, 1);
  tl::if_(n < 0, [&] { tl::device_print("acc ", tl::Tile(acc)); });
  tl::store(x + offs, acc, offs < n);
}

// Shapes, dots, reductions and scans with combine functions, bitcasts.
TL_JIT(text_shapes, tl::Ptr a, tl::Ptr b, tl::Ptr out, tl::Ptr bits) {
  auto r = tl::arange(0, 16), c = tl::arange(0, 16);
  auto idx = r[{tl::_, tl::None}] * 16 + c[{tl::None, tl::_}];
  auto ta = tl::load(a + idx), tb = tl::load(b + idx);
  tl::DotOptions o;
  o.input_precision = "tf32x3";
  auto d = tl::dot(ta, tb, std::nullopt, o);
  auto p = tl::permute(tl::reshape(d, {2, 8, 16}), {2, 0, 1});
  auto [s0, s1] = tl::split(tl::join(ta, tb));
  auto k = tl::cat(tl::flip(s0, 0),
                   tl::gather(s1, (r % 3)[{tl::_, tl::None}] + c[{tl::None, tl::_}] * 0, 0));
  auto mx = tl::reduce(k, 0, [](tl::Tile u, tl::Tile v) { return tl::maximum(u, v); });
  auto sc = tl::associative_scan(
      d, 1, [](tl::Tile u, tl::Tile v) { return u + v; }, true);
  // An impure extern call whose library spans lines and holds quotes (the text's escapes).
  static const tl::ExternLibrary lib{
      "textlib", "static inline float tx_neg(float x) {\n  return -x;  // \"-\"\n}",
      "__device__ float tx_neg(float x) { return -x; }"};
  auto e = tl::extern_elementwise(lib, {sc}, {{{DType::Float32}, "tx_neg", DType::Float32}}, false);
  tl::store(out + idx, e + tl::sum(tl::sum(p, 2), 1)[{tl::_, tl::None}] + mx[{tl::None, tl::_}]);
  tl::store(bits + idx, tl::bitcast(d, tl::int32));
}

std::shared_ptr<const ir::Function> traced(const tl::JITFunction& k) {
  return k.state().last->function;
}

std::vector<std::shared_ptr<const ir::Function>> all_kernels() {
  // Traced for the checked mode: without it, tl drops device_asserts before generation.
  ScopedEnv debug("TESSERA_DEBUG", "1");
  Tensor x = random_tensor({64}, DType::Float32), y = random_tensor({64}, DType::Float32),
         out = empty({64});
  text_pointwise[{4}](x, y, out, 64, 1.5, tl::meta("BLOCK", 16));
  Tensor cnt = zeros({2}, TensorOptions().dtype(DType::Int32));
  text_control[{1}](x, cnt, 64, tl::meta("BLOCK", 16));
  Tensor a = random_tensor({256}, DType::Float32), b = random_tensor({256}, DType::Float32),
         o = empty({256}), bits = empty({256}, TensorOptions().dtype(DType::Int32));
  text_shapes[{1}](a, b, o, bits);
  return {traced(text_pointwise), traced(text_control), traced(text_shapes)};
}

TEST(IrText, EveryOpPrintsAndParsesBackToAnEqualFunction) {
  std::set<ir::OpKind> seen;
  for (const auto& f : all_kernels()) {
    ASSERT_NE(f, nullptr);
    const std::string text = ir::print(*f);
    std::unique_ptr<ir::Function> g;
    try {
      g = ir::parse(text);
    } catch (const Error& e) {
      FAIL() << e.what() << "\n" << text;
    }
    std::string why;
    EXPECT_TRUE(ir::same_function(*f, *g, &why)) << why << "\n" << text;
    EXPECT_EQ(ir::print(*g), text);
    ir::walk(f->body, [&](const ir::Op* op) { seen.insert(op->kind); });
  }
  // The kernels above reach every op kind but the ones the pipeline folds away everywhere.
  std::string missing;
  for (int k = 0; k <= static_cast<int>(ir::OpKind::Print); ++k) {
    if (!seen.count(static_cast<ir::OpKind>(k)))
      missing += std::string(" ") + ir::op_name(static_cast<ir::OpKind>(k));
  }
  EXPECT_EQ(missing, "") << "op kinds no round-trip case reaches";
}

TEST(IrText, ParseErrorsNameTheLineAndColumn) {
  const std::string bad =
      "kernel @k(%0: *fp32 x) {\n"
      "  %1 = const 1.0 : fp32\n"
      "  %2 = frobnicate %1 : fp32\n"
      "}\n";
  const std::string msg = error_of<ValueError>([&] { ir::parse(bad); });
  EXPECT_NE(msg.find("[ir::parse] line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown op 'frobnicate'"), std::string::npos) << msg;
  const std::string undefined =
      "kernel @k(%0: *fp32 x) {\n"
      "  store %0, %7\n"
      "}\n";
  EXPECT_NE(
      error_of<ValueError>([&] { ir::parse(undefined); }).find("%7 is not defined before its use"),
      std::string::npos);
  const std::string unclosed = "kernel @k() {\n  %0 = const 1 : i32\n";
  EXPECT_NE(error_of<ValueError>([&] { ir::parse(unclosed); }).find("not closed"),
            std::string::npos);
}

// The verifier reads operand counts and operand domains from the op-trait table; parsed text
// that breaks them is a ValueError naming the op.
TEST(IrVerify, OperandCountsAndDomainsComeFromTheOpTable) {
  auto verify_error = [](const std::string& text) {
    return error_of<ValueError>([&] { ir::parse(text); });
  };
  const std::string xor_of_floats =
      "kernel @k(%0: fp32 x) {\n"
      "  %1 = xor %0, %0 : fp32\n"
      "}\n";
  EXPECT_NE(verify_error(xor_of_floats).find("xor of fp32"), std::string::npos);
  const std::string exp_of_ints =
      "kernel @k(%0: i32 x) {\n"
      "  %1 = exp %0 : i32\n"
      "}\n";
  EXPECT_NE(verify_error(exp_of_ints).find("exp of i32"), std::string::npos);
  const std::string load_of_four =
      "kernel @k(%0: *fp32 x) {\n"
      "  %1 = load %0, %0, %0, %0 : fp32\n"
      "}\n";
  EXPECT_NE(verify_error(load_of_four).find("4 operands (takes 1 to 3)"), std::string::npos);
  const std::string well_formed =
      "kernel @k(%0: fp32 x, %1: i32 n) {\n"
      "  %2 = exp %0 : fp32\n"
      "  %3 = neg %1 : i32\n"
      "  %4 = xor %3, %1 : i32\n"
      "}\n";
  const auto f = ir::parse(well_formed);
  EXPECT_NO_THROW(ir::verify(*f));
  // Every kind's name parses back to that kind (the parser iterates the same tables).
  for (int k = 0; k < ir::num_unary_kinds(); ++k) {
    const auto kind = static_cast<ir::UnaryKind>(k);
    const bool ints = ir::unary_traits(kind).ints;
    const std::string text = std::string("kernel @k(%0: ") + (ints ? "i32" : "fp32") +
                             " x) {\n  %1 = " + ir::unary_name(kind) +
                             " %0 : " + (ints ? "i32" : "fp32") + "\n}\n";
    const auto g = ir::parse(text);
    ASSERT_EQ(g->body.ops.size(), 1u);
    EXPECT_EQ(g->body.ops[0]->kind, ir::OpKind::Unary);
    EXPECT_EQ(g->body.ops[0]->sub, k) << text;
    EXPECT_NO_THROW(ir::verify(*g)) << text;
  }
}

// Found by fuzz_ir_text (tests/fuzz/regressions/ir_text): the verifier let through ops whose
// result type does not follow from their operands (a broadcast that turned fp32 into i32 made
// canonicalize fold an fp32 constant into an addptr offset: an internal error), and a location
// comment naming a path with spaces did not print back to itself.
TEST(IrVerify, FuzzFindingsEveryOpsResultTypeIsChecked) {
  auto verify_error = [](const std::string& body, const std::string& params = "%0: *fp32 x") {
    return error_of<ValueError>([&] { ir::parse("kernel @k(" + params + ") {\n" + body + "}\n"); });
  };
  EXPECT_NE(verify_error("  %1 = const 1.0 : <4x fp32>\n"
                         "  %2 = broadcast %1 : <4x4x i32>\n")
                .find("broadcast stretches size-1 dims"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = program_id {axis = 0} : i64\n").find("result must be i32"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = program_id {axis = 3} : i32\n").find("axis must be 0, 1 or 2"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = arange {start = 4, end = 4} : <1x i32>\n").find("arange"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = const 1 : <0x i32>\n").find("a dim of 0"), std::string::npos);
  EXPECT_NE(verify_error("  %1 = const 1 : <2048x1024x i32>\n").find("larger than a tile"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = const 300 : i8\n").find("300 is not a value of i8"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = const 6$ : i32\n").find("'6$' is not a constant"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = const 1.0 : <4x fp32>\n"
                         "  %2 = reduce.sum %1 {axis = 0} : <4x fp32>\n")
                .find("the result drops the axis"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = const 1 : <4x i32>\n"
                         "  %2 = splat %0 : <4x *fp32>\n"
                         "  %3 = load %2 : <4x fp16>\n")
                .find("pointee type"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = const 1 : <4x i32>\n"
                         "  %2 = bitcast %1 : <4x fp16>\n")
                .find("element width"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = const 1.0 : fp32\n"
                         "  %2 = store %0, %1 : fp32\n")
                .find("1 results (has 0)"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = const 1 : i32\n"
                         "  yield %1\n")
                .find("yield outside a loop or branch"),
            std::string::npos);
  EXPECT_NE(verify_error("  %1 = const 1 : <2x4x i32>\n"
                         "  %2 = permute %1 {perm = [0, 0]} : <2x2x i32>\n")
                .find("permutation"),
            std::string::npos);
  // A location is the base name and a line, whatever the comment held.
  const auto f = ir::parse(
      "kernel @k(%0: *fp32 x) {\n"
      "  %1 = const 1.0 : fp32  // a b // dir/ my file.cpp:61\n"
      "  %2 = const 2.0 : fp32  // a note, no line\n"
      "  store %0, %1  // file.cpp:\n"
      "}\n");
  const std::string printed = ir::print(*f);
  EXPECT_NE(printed.find("// my file.cpp:61"), std::string::npos) << printed;
  std::string why;
  EXPECT_TRUE(ir::same_function(*f, *ir::parse(printed), &why)) << why;
}

// ---- passes, text in and text out
// ----------------------------------------------------------------

std::string run(std::string_view in, void (*pass)(ir::Function&)) {
  auto f = ir::parse(in);
  pass(*f);
  return ir::print(*f, /*attributes=*/false);
}

TEST(IrPasses, CanonicalizeFoldsConstants) {
  const std::string out = run(R"(kernel @k(%0: *i32 x) {
  %1 = const 6 : i32
  %2 = const 7 : i32
  %3 = mul %1, %2 : i32
  %4 = splat %3 : <4 x i32>
  %5 = splat %0 : <4 x *i32>
  %6 = arange {start = 0, end = 4} : <4 x i32>
  %7 = addptr %5, %6 : <4 x *i32>
  store %7, %4
}
)",
                              [](ir::Function& f) { ir::canonicalize(f); });
  EXPECT_NE(out.find("const 42 : i32"), std::string::npos) << out;
  EXPECT_EQ(out.find(" mul "), std::string::npos) << out;
}

// x + dot(a, b, 0) is dot(a, b, x) (Triton's combine: flash attention's `acc += dot(p, v)` then
// accumulates in the dot); not where the product is read again or its accumulator is not zero.
TEST(IrPasses, CanonicalizeAccumulatesAnAddIntoADotFromZero) {
  auto program = [](const char* acc, bool reread) {
    return std::string("kernel @k(%0: *fp32 x) {\n  %1 = const 1.0 : <16x16 x bf16>\n") +
           "  %2 = const " + acc + " : <16x16 x fp32>\n  %3 = const 2.0 : <16x16 x fp32>\n" +
           "  %4 = dot.ieee %1, %1, %2 : <16x16 x fp32>\n  %5 = add %3, %4 : <16x16 x fp32>\n" +
           "  %6 = splat %0 : <16x16 x *fp32>\n  store %6, %5\n" +
           (reread ? "  store %6, %4\n" : "") + "}\n";
  };
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  auto canon_dce = [](ir::Function& f) {
    ir::canonicalize(f);
    ir::dce(f);
  };
  const std::string fused = run(program("0.0", false), canon_dce);
  EXPECT_EQ(count(fused, " dot.ieee "), 1u) << fused;
  EXPECT_EQ(count(fused, " add "), 0u) << fused;
  EXPECT_EQ(fused.find("const 0.0"), std::string::npos) << fused;  // (the dot's acc is 2.0's)
  for (const auto& [acc, reread] : {std::pair{"0.0", true}, std::pair{"1.0", false}}) {
    const std::string kept = run(program(acc, reread), canon_dce);
    EXPECT_EQ(count(kept, " add "), 1u) << kept;
    EXPECT_EQ(count(kept, " dot.ieee "), 1u) << kept;
  }
}

TEST(IrPasses, NarrowIntegerProductsWrapWithoutOverflowingInt) {
  // -3 * -3 in int16 and 65533 * 65533 in uint16 (both 9 after wrapping): computed naively, the
  // 16-bit operands are promoted to int and 65533 * 65533 overflows it (UBSan's first finding,
  // issue 19; `make sanitize` fails here without the fix).
  for (const char* ty : {"i16", "u16"}) {
    const std::string v = std::string(ty) == "i16" ? "-3" : "65533";
    const std::string out =
        run("kernel @k(%0: *" + std::string(ty) + " x) {\n  %1 = const " + v + " : " + ty +
                "\n  %2 = mul %1, %1 : " + ty + "\n  store %0, %2\n}\n",
            [](ir::Function& f) { ir::canonicalize(f); });
    EXPECT_NE(out.find("const 9 : " + std::string(ty)), std::string::npos) << out;
  }
}

// Extern calls: equal pure calls are one value; impure ones, or calls of different functions,
// are not merged; an unused impure call stays.
TEST(IrPasses, CseAndDceRespectExternCallsPurity) {
  auto ext = [](const char* sym, bool impure) {
    return std::string("extern %1 {text = \"lib\x1f") + sym + "\x1fsrc\x1f\"" +
           (impure ? ", impure = 1" : "") + "} : fp32";
  };
  auto program = [&](const std::string& a, const std::string& b, bool use_second) {
    return "kernel @k(%0: *fp32 x) {\n  %1 = load %0 : fp32\n  %2 = " + a + "\n  %3 = " + b +
           "\n  %4 = add %2, " + (use_second ? "%3" : "%2") + " : fp32\n  store %0, %4\n}\n";
  };
  auto count = [](const std::string& text) {
    size_t n = 0;
    for (size_t at = text.find("extern"); at != std::string::npos; at = text.find("extern", at + 1))
      ++n;
    return n;
  };
  auto cse_dce = [](ir::Function& f) {
    ir::cse(f);
    ir::dce(f);
  };
  EXPECT_EQ(count(run(program(ext("f", false), ext("f", false), true), cse_dce)), 1u);
  EXPECT_EQ(count(run(program(ext("f", true), ext("f", true), true), cse_dce)), 2u);
  EXPECT_EQ(count(run(program(ext("f", false), ext("g", false), true), cse_dce)), 2u);
  EXPECT_EQ(count(run(program(ext("f", false), ext("g", true), false), cse_dce)), 2u);
  EXPECT_EQ(count(run(program(ext("f", false), ext("g", false), false), cse_dce)), 1u);
}

TEST(IrPasses, CseMergesEqualOpsAndDceRemovesUnusedOnes) {
  const std::string in = R"(kernel @k(%0: *fp32 x, %1: i32 n) {
  %2 = program_id {axis = 0} : i32
  %3 = program_id {axis = 0} : i32
  %4 = add %2, %1 : i32
  %5 = add %3, %1 : i32
  %6 = mul %4, %5 : i32
  %7 = sub %4, %1 : i32
  %8 = addptr %0, %6 : *fp32
  %9 = load %8 : fp32
  store %8, %9
}
)";
  const std::string cse = run(in, [](ir::Function& f) { ir::cse(f); });
  size_t adds = 0;
  for (size_t p = cse.find(" = add "); p != std::string::npos; p = cse.find(" = add ", p + 1))
    ++adds;
  EXPECT_EQ(adds, 1u) << cse;
  const std::string dce = run(in, [](ir::Function& f) { ir::dce(f); });
  EXPECT_EQ(dce.find(" sub "), std::string::npos) << dce;  // unused
  EXPECT_NE(dce.find("store"), std::string::npos) << dce;  // a side effect stays
}

}  // namespace
