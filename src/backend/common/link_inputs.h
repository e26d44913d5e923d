/** \file
 * Precompiled files a kernel links (`tl::ExternLibrary::cpu_objects` / `cuda_objects`): how a
 * generated kernel's source names them, so that the source, and with it the disk cache's key,
 * holds the SHA-256 of every byte linked, and how each toolchain reads them back.
 */
#pragma once

#include <string>
#include <vector>

namespace tessera::backend {

/** A file to link: the SHA-256 of its bytes when the kernel was traced, and its absolute path. */
struct LinkInput {
  std::string digest, path;
};

/** The files of an extern call's object list (ir::ExternCall: "<sha256> <path>" lines). */
std::vector<LinkInput> parse_object_list(const std::string& list);

/** The line a generated kernel's source carries for each file it links. */
std::string link_directive(const LinkInput& in);

/** The files a generated kernel's source links, in order, each once. */
std::vector<LinkInput> link_inputs(const std::string& source);

/** A CompileError naming `kernel` when a file no longer has the bytes it was traced with (the
 * cache entry would hold other code than its key says). */
void check_unchanged(const LinkInput& in, const std::string& kernel);

}  // namespace tessera::backend
