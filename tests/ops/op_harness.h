/** \file
 * The op-test harness (STYLE.md, after ggml's test-backend-ops): each op is declared once with its
 * inputs (shapes, dtypes, value domains), a double-precision reference and a tolerance. The
 * harness runs it for every dtype, on contiguous, transposed, strided and offset inputs, compares
 * with the reference, checks the result dtype, runs the `out=` variant into a poisoned output, and
 * runs the op on `meta` tensors to check its shape function against the real result.
 */
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "testing.h"

namespace tessera::testing {

using Shape = std::vector<int64_t>;

struct OpSpec {
  std::string name;
  /** dtypes to run; for each, `input_dtypes` gives every input's dtype (default: all the same). */
  std::vector<DType> dtypes;
  std::function<DType(DType, size_t)> input_dtypes;
  /** Sets of input shapes; each set is one case. */
  std::vector<std::vector<Shape>> shapes;
  /** Value domain of each input (default Any). */
  std::vector<Domain> domains;
  /** Runs the op. */
  std::function<Tensor(const std::vector<Tensor>&)> run;
  /** Optional `out=` variant. */
  std::function<void(Tensor& out, const std::vector<Tensor>&)> run_out;
  /** The reference on double values; `dtype` is the case's dtype. */
  std::function<Ref(const std::vector<Ref>&, DType dtype)> ref;
  /** Expected result dtype (default: the case's dtype). */
  std::function<DType(DType)> out_dtype;
  /** Tolerance (default: default_tol of the result dtype, widened by `tol_scale`). */
  double tol_scale = 1;
  /** Also run on non-contiguous layouts. */
  bool layouts = true;
  /** Also check the shape function on meta tensors. */
  bool meta = true;
};

/** Runs every case of `spec`; failures name op, dtype, layout, shapes and seed. */
void run_spec(const OpSpec& spec);

// ---- reference helpers ----------------------------------------------------------------------

/** Wraps a value to an integer dtype's range (two's complement), or rounds to the float dtype. */
double round_to(DType t, double v);
Ref reduce_ref(const Ref& x, std::vector<int64_t> dims, bool keepdim,
               const std::function<double(const std::vector<double>&)>& f);
/** Applies f to each line along `dim` (f maps a line to a line of the same length). */
Ref along_ref(const Ref& x, int64_t dim,
              const std::function<std::vector<double>(const std::vector<double>&)>& f);

}  // namespace tessera::testing
