/** \file
 * Small filesystem helpers shared by the on-disk caches (compiled kernels, the tuning database).
 */
#pragma once

#include <string>

namespace tessera::files {

/** Creates `path` and its parents; false (errno set) when one cannot be created. */
bool make_dirs(const std::string& path);
/** Removes a directory tree (best effort). */
void remove_tree(const std::string& path);
/** The whole file, or "" when it cannot be read. */
std::string read_file(const std::string& path);

}  // namespace tessera::files
