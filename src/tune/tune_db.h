/** \file
 * The tuning database (DESIGN.md D2): one timing record per (kernel code, config, tuning key,
 * target), under `$TESSERA_CACHE_DIR/tune/`.
 *
 * Each record is a small file named by the SHA-256 of its identity, written to a temporary file
 * and renamed into place, so several processes can tune at once: a reader sees a whole record
 * or none, and the last writer wins. A damaged record is ignored (and replaced by the next
 * timing). `tessera tune-db ls|export|import|clear` manages it.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/tune_db.h"

namespace tessera::tune {

using Record = tune_db::Record;

std::string root();
std::optional<Record> find(const Record& identity);
/** Writes (or replaces) a record. Failures to write are logged, not thrown: tuning results
 * still apply to this process. */
void put(const Record& r);
std::vector<Record> all();
/** Removes every record; returns how many there were. */
size_t clear();

/** One line per record, tab-separated (`export`), after a header line. */
std::string to_text(const std::vector<Record>& records);
/** Parses `to_text` output; a malformed line is a ValueError naming its number. */
std::vector<Record> from_text(const std::string& text);

}  // namespace tessera::tune
