// The seed's kernel, as examples/seed_basic_usage.cpp writes it: the benchmarks' common workload.
#pragma once

#include "tessera/tl.h"

namespace bench {

namespace tl = tessera::tl;

TL_JIT(add_kernel, tl::Ptr in_ptr0, tl::Ptr in_ptr1, tl::Ptr out_ptr, tl::Int n_elements,
       tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto block_start = pid * BLOCK_SIZE;
  auto offsets = block_start + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(in_ptr0 + offsets, mask);
  auto y = tl::load(in_ptr1 + offsets, mask);
  auto output = x + y;
  tl::store(out_ptr + offsets, output, mask);
}

}  // namespace bench
