/** \file
 * The on-disk caches' one writer and checker (DESIGN.md D2): compiled kernels of every backend and
 * the tuning database go through it.
 *
 * Entries are content-addressed: `<root>/<first 2 hex>/<64-hex key>/`. An entry is written in a
 * private staging folder and renamed into place, so concurrent processes never see half an entry
 * and the first rename wins. Every file an entry depends on is recorded with its SHA-256 in the
 * entry's `info` record; a process checks the digests the first time it reads the entry, and a
 * damaged entry (a missing, truncated or overwritten file, a garbled record) is moved away,
 * logged on the `cache` channel, and reported as absent so that the caller rebuilds it. Single
 * files (tuning records) are written to a temporary name and renamed likewise.
 */
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::runtime::disk {

/** A name no other thread or process uses at the same time (for staging files and folders). */
std::string unique_suffix();

/** Writes `bytes` to `path` atomically (a temporary file beside it, then rename); false with a
 * one-time warning naming `what` when it cannot. */
bool write_atomic(const std::string& path, std::string_view bytes, const char* what);

/** The SHA-256 of a file's contents (hex), or "" when it cannot be read. */
std::string file_digest(const std::string& path);

/** An entry's record: `key=value` lines, plus `file=<name> <bytes> <sha256>` for each file. */
struct Info {
  std::map<std::string, std::string> values;
  struct File {
    std::string name;
    uint64_t bytes = 0;
    std::string sha256;
  };
  std::vector<File> files;

  std::string get(const std::string& k, const std::string& fallback = "") const;
  std::string text() const;
  /** Parses a record; nullopt when garbled. */
  static std::optional<Info> parse(const std::string& text);
};

/** A content-addressed store under `$TESSERA_CACHE_DIR/<area>`. */
class Store {
 public:
  explicit Store(std::string area) : area_(std::move(area)) {}

  std::string root() const;
  std::string dir_of(const std::string& key) const;

  /** A new private staging folder for an entry (write its files there, then `publish`). */
  std::string stage() const;
  /** Adds `name` (already in `staged`) to `info` with its size and digest. */
  static void record_file(Info& info, const std::string& staged, const std::string& name);
  /** Writes `info` into `staged` and renames it to the entry of `key`; false when another process
   * published `key` first (its entry stands and the staged folder is removed). */
  bool publish(const std::string& staged, const std::string& key, const Info& info) const;

  /** The entry's record after checking every recorded file's size and digest; nullopt when
   * absent, or damaged (then moved away; `why` says what was wrong). */
  std::optional<Info> open(const std::string& key, std::string* why = nullptr) const;
  /** Moves an entry away and deletes it (a damaged or unloadable entry), logging `why`. */
  void discard(const std::string& key, const std::string& why) const;

  /** The keys of every entry (unchecked). */
  std::vector<std::string> keys() const;
  /** Removes every entry; returns how many there were. */
  size_t clear() const;

 private:
  std::string area_;
};

}  // namespace tessera::runtime::disk
