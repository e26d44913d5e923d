#include <gtest/gtest.h>

#include <cstdlib>

#include "tessera/env.h"
#include "tessera/error.h"

using namespace tessera;

namespace {
void check_positive(int v) {
  TS_CHECK(v > 0, IndexError) << "[my_op] value " << v << " must be positive";
}
void plain_check(int v) {
  TS_CHECK(v > 0);
}
}  // namespace

TEST(Error, CheckThrowsTypedErrorWithMessage) {
  try {
    check_positive(-3);
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_EQ(e.message(), "[my_op] value -3 must be positive");
    EXPECT_STREQ(e.kind(), "IndexError");
    EXPECT_FALSE(e.user_loc().known());
  }
  EXPECT_NO_THROW(check_positive(1));
  try {
    plain_check(0);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(e.message().find("v > 0"), std::string::npos);
  }
}

TEST(Error, UserLocationIsRecordedByTheOutermostGuard) {
  try {
    UserLocGuard outer(SourceLoc{"/home/u/model.cpp", 12});
    UserLocGuard inner(SourceLoc{"/lib/inner.cpp", 99});
    check_positive(0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.user_loc().line, 12);
    EXPECT_NE(std::string(e.what()).find("(at model.cpp:12)"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(UserLocGuard::current().known());
}

TEST(Error, InternalAssertSaysItIsABug) {
  try {
    TS_INTERNAL_ASSERT(1 + 1 == 3) << "arithmetic broke";
    FAIL();
  } catch (const InternalError& e) {
    EXPECT_NE(e.message().find("tessera bug"), std::string::npos);
    EXPECT_NE(e.message().find("arithmetic broke"), std::string::npos);
  }
}

TEST(Env, KnobsParseLists) {
  setenv("TESSERA_LOGS", "graph, recompiles", 1);
  setenv("TESSERA_CACHE_DIR", "/tmp/tessera-test-cache", 1);
  reload_knobs();
  EXPECT_TRUE(knobs().log_enabled("graph"));
  EXPECT_TRUE(knobs().log_enabled("recompiles"));
  EXPECT_FALSE(knobs().log_enabled("cache"));
  EXPECT_EQ(knobs().cache_dir, "/tmp/tessera-test-cache");
  unsetenv("TESSERA_LOGS");
  unsetenv("TESSERA_CACHE_DIR");
  reload_knobs();
  EXPECT_FALSE(knobs().log_enabled("graph"));
}

TEST(Env, AKnobThatChangesNothingYetSaysSo) {
  setenv("TESSERA_DEVICE", "cuda:0", 1);
  ::testing::internal::CaptureStderr();
  reload_knobs();
  const std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("TESSERA_DEVICE");
  reload_knobs();
  EXPECT_NE(err.find("TESSERA_DEVICE='cuda:0' changes nothing yet"), std::string::npos) << err;
}

TEST(Env, AnUnknownKnobIsNamed) {
  setenv("TESSERA_DEBGU", "1", 1);  // a typo
  ::testing::internal::CaptureStderr();
  reload_knobs();
  const std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("TESSERA_DEBGU");
  reload_knobs();
  EXPECT_NE(err.find("unknown environment variable TESSERA_DEBGU"), std::string::npos) << err;
  EXPECT_NE(err.find("TESSERA_DEBUG"), std::string::npos) << err;
}
