/** \file
 * The tuning database as data (DESIGN.md D2), what `tessera tune-db ls|export|import|clear` shows:
 * one timing record per (kernel code, config, tuning key, target) under `$TESSERA_CACHE_DIR/tune/`,
 * written by `tl::autotune` and read back by every later tuner of the same kernel (in any process).
 *
 *     for (const auto& r : tessera::tune_db::records())
 *       std::cout << r.kernel << "  " << r.config << "  " << r.ms << " ms\n";
 *     std::string text = tessera::tune_db::export_text();   // ship timings to another machine
 *     tessera::tune_db::import_text(text);                  // all lines checked before any is kept
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::tune_db {

/** One timing. */
struct Record {
  std::string kernel;  ///< the kernel's name (for people; the identity is `code`)
  std::string config;  ///< `BLOCK_SIZE: 1024, num_warps: 4, num_stages: 3`
  std::string key;     ///< the tuning key: key arguments, dtypes, specialization bits
  std::string target;  ///< where it was timed (`cpu:<features digest>`, `cuda:sm_90`)
  std::string code;    ///< the hash of the config's generated kernel (the kernel IR hash)
  double ms = 0;       ///< measured time (ms)
  int64_t unix_time = 0;

  /** The identity's digest (the record's file name): kernel code, config, key and target. */
  std::string id() const;
};

/** The database's folder. */
std::string root();
/** Every record (damaged ones are skipped, as tuners skip them). */
std::vector<Record> records();
/** Records as text: a header line, then one tab-separated line per record. */
std::string export_text(const std::vector<Record>& records);
/** Every record as text. */
std::string export_text();
/** Parses `export_text`'s output; a malformed line is a ValueError naming its number. */
std::vector<Record> parse_text(const std::string& text);
/** Adds (or replaces) the records of `text`, all checked before any is written; how many. */
size_t import_text(const std::string& text);
/** Removes every record; how many there were. */
size_t clear();

}  // namespace tessera::tune_db
