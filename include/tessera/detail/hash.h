/** \file
 * Hashing: SHA-256 for content-addressed caches (kernel binaries keyed by source, headers,
 * compiler and flags), and a fast 64-bit mix for in-memory tables.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

/** Incremental SHA-256 (FIPS 180-4). */
class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t n);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  /** Adds a length-prefixed field, so that ("ab","c") and ("a","bc") differ. */
  Sha256& field(std::string_view s);
  /** The digest as 64 lowercase hex characters; the object is spent afterwards. */
  std::string hex();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

/** SHA-256 of a string, in hex. */
std::string sha256_hex(std::string_view s);

/** A 64-bit mix (splitmix64 finalizer) for combining hashes. */
inline uint64_t hash_mix(uint64_t h, uint64_t v) {
  uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace tessera
