// Linked into every test binary: a suite run with TESSERA_CROSSCHECK=cuda or
// TESSERA_TEST_DEVICE=cuda (the `gpu` label's passes) on a machine without a GPU skips itself with
// a message (CTest's SKIP_RETURN_CODE 77) instead of failing at its first kernel.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tessera/version.h"

namespace {

class CrossCheckGate : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* c = std::getenv("TESSERA_CROSSCHECK");
    const char* d = std::getenv("TESSERA_TEST_DEVICE");
    const bool cross = c && std::string(c) == "cuda";
    const bool on_gpu = d && std::string(d).starts_with("cuda");
    if ((!cross && !on_gpu) || tessera::cuda_is_available()) return;
    std::fprintf(stderr, "SKIPPED: %s, and this machine has none (no CUDA driver or no device)\n",
                 cross ? "TESSERA_CROSSCHECK=cuda runs every kernel on a GPU too"
                       : "TESSERA_TEST_DEVICE asks for a GPU");
    std::fflush(stderr);
    std::_Exit(77);
  }
};

[[maybe_unused]] ::testing::Environment* const gate =
    ::testing::AddGlobalTestEnvironment(new CrossCheckGate);

}  // namespace
