// libtessera's thread-locals use the initial-exec TLS model (docs/decisions.md, issue 12). That
// keeps them off __tls_get_addr, but a library with static TLS can be dlopened late (from
// Python through ctypes, say) only while its TLS segment fits glibc's surplus (512 bytes by
// default). This test fails when the segment outgrows it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <cstring>
#include <string>

#include "tessera/env.h"

namespace {

struct Found {
  std::string name;
  size_t tls_bytes = 0;
  bool seen = false;
};

}  // namespace

TEST(LibraryTls, StaticTlsSegmentFitsTheDlopenSurplus) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&tessera::knobs), &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  Found found;
  found.name = info.dli_fname;
  ASSERT_NE(found.name.find("libtessera"), std::string::npos)
      << "tessera::knobs is not in libtessera.so but in " << found.name;
  // Both libraries (libtessera_runtime and libtessera): a late dlopen of the pair needs room for
  // the sum of their segments.
  dl_iterate_phdr(
      [](dl_phdr_info* p, size_t, void* data) {
        auto* f = static_cast<Found*>(data);
        if (p->dlpi_name == nullptr) return 0;
        const std::string name = p->dlpi_name;
        if (name.find("/libtessera") == std::string::npos) return 0;
        if (f->name == name) f->seen = true;
        for (int i = 0; i < p->dlpi_phnum; ++i)
          if (p->dlpi_phdr[i].p_type == PT_TLS) f->tls_bytes += p->dlpi_phdr[i].p_memsz;
        return 0;
      },
      &found);
  ASSERT_TRUE(found.seen) << found.name;
  EXPECT_GT(found.tls_bytes, 0u) << "no TLS segment: the thread-locals moved?";
  EXPECT_LE(found.tls_bytes, 512u)
      << "libtessera's TLS segments are " << found.tls_bytes
      << " bytes; past glibc's 512-byte surplus a late dlopen fails (keep thread-locals small or "
         "drop the initial-exec model)";
}
