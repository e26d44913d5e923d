// What the disk caches read back (runtime/disk_cache, tune/tune_db): an entry's `info` record and
// the tuning database's export text (`tessera tune-db import`). Both come from files another
// process (or a damaged disk) wrote. The first byte picks the reader.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz.h"
#include "runtime/disk_cache.h"
#include "tune/tune_db.h"

using namespace tessera;

static void cache_record(const std::string& text) {
  std::optional<runtime::disk::Info> info;
  fuzz::must("records", "Info::parse", [&] { info = runtime::disk::Info::parse(text); });
  if (!info) return;
  const std::string again = info->text();
  auto reread = runtime::disk::Info::parse(again);
  if (!reread || reread->text() != again)
    fuzz::finding("records", "info record round trip: " + again);
}

static void tune_export(const std::string& text) {
  std::vector<tune::Record> records;
  if (!fuzz::accepts("records", [&] { records = tune::from_text(text); })) return;
  const std::string again = tune::to_text(records);
  std::vector<tune::Record> reread;
  fuzz::must("records", "from_text of to_text", [&] { reread = tune::from_text(again); });
  if (tune::to_text(reread) != again) fuzz::finding("records", "tune-db export round trip");
  for (size_t i = 0; i < records.size(); ++i)
    if (records[i].id() != reread[i].id()) fuzz::finding("records", "a record's identity changed");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1)
    tune_export(text);
  else
    cache_record(text);
  return 0;
}
