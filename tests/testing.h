/** \file
 * Test helpers: random tensors in a value domain, layouts (contiguous, transposed, strided, with
 * a storage offset), a double-precision reference array, poisoning, and closeness checks that
 * name the first mismatching element.
 */
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "tessera/two_tensor.h"

namespace tessera::testing {

/** Sets an environment variable (or unsets it, `value` null) for a scope and reloads the knobs;
 * its previous value comes back at the end, so a CTest pass run with `TESSERA_INTERPRET=1` or
 * `TESSERA_DEBUG=1` stays in that mode after a test that switches the mode for a while. */
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

/** Values a test input may take. */
enum class Domain {
  Any,       ///< floats in [-3, 3]; signed ints in [-8, 8]; unsigned in [0, 16]
  Positive,  ///< floats in [0.1, 4]; ints in [1, 8]
  NonZero,   ///< like Any without zero (divisors)
  Small,     ///< ints in [0, 4] (exponents, shift amounts)
  Unit,      ///< floats in [-0.9, 0.9]
};

/** How an input tensor is laid out in memory. */
enum class Layout { Contiguous, Transposed, Strided, Offset };
const char* layout_name(Layout l);
inline constexpr Layout kAllLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Strided,
                                         Layout::Offset};

/** A seeded generator; the seed is printed by failing checks (TESSERA_TEST_SEED overrides). */
std::mt19937_64& rng();
uint64_t test_seed();

/** A tensor of `shape` and `dtype` with random values from `domain`, laid out as `layout`. */
Tensor random_tensor(IntArrayRef shape, DType dtype, Domain domain = Domain::Any,
                     Layout layout = Layout::Contiguous);

/** The device the op harness runs its cases on: `TESSERA_TEST_DEVICE` (`cuda`, `cuda:N`), else
 * the CPU. The `gpu` label's `test_ops_cuda` pass sets it. */
Device test_device();
/** `t` on `device` with the same sizes, strides and storage offset (its whole storage copied), so
 * a case's layout survives the move. */
Tensor same_layout_on(const Tensor& t, Device device);

/** Plain values in row-major order with a shape: the reference's data type. */
struct Ref {
  std::vector<int64_t> shape;
  std::vector<double> data;

  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  /** Value at a multi-index. */
  double at(const std::vector<int64_t>& idx) const;
};

/** The values of a CPU tensor as doubles. */
Ref to_ref(const Tensor& t);
/** Broadcast-applies f elementwise over the inputs (NumPy rules). */
Ref pointwise_ref(const std::vector<Ref>& in,
                  const std::function<double(const std::vector<double>&)>& f);

/** Absolute and relative tolerance; ints use zero. */
struct Tol {
  double atol = 0, rtol = 0;
};
/** A default tolerance for comparing a dtype's result with a double reference. */
Tol default_tol(DType t);

/** Checks shape and values (NaNs match NaNs); reports the first mismatch with its index. */
::testing::AssertionResult close_to(const Tensor& got, const Ref& want, Tol tol);

/** `allclose` with the shapes required equal (allclose broadcasts: `[3]` against `[]` passes
 * there); names the first mismatching element. Use it in tests instead of `allclose`. */
::testing::AssertionResult all_close(const Tensor& got, const Tensor& want, double rtol = 1e-5,
                                     double atol = 1e-8, bool equal_nan = false);

/** Same shape and dtype, and every element the same bits (NaNs with the same payload too);
 * names the first element that differs. */
::testing::AssertionResult bitwise_equal(const Tensor& got, const Tensor& want);

/** How many float32 units in the last place `got` is from the exact value `want` (NaN and
 * infinities: 0 when matched, 1e9 otherwise; near zero, in units of the smallest subnormal). */
double ulp_error(float got, double want);

/** Fills a tensor with a poison value (declared again from tessera/testing.h, which this header
 * does not include: its `testing::detail` would make `detail::` ambiguous in tests). */
void poison(Tensor& t);

/** Runs f and returns the message of the tessera::Error it throws (fails if none). */
template <class E = Error>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

}  // namespace tessera::testing
