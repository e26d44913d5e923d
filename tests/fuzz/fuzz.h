/** \file
 * Shared by the libFuzzer targets (issue 19; `make fuzz`, docs/reliability.md).
 *
 * A target reads untrusted bytes the way tessera reads them from disk or the environment. Every
 * bad input must end in a typed tessera::Error that is not an InternalError; anything else (a
 * crash, a sanitizer report, another exception, an InternalError, a broken round trip) is a
 * finding: the target prints it and aborts, and libFuzzer saves the input.
 */
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "tessera/error.h"

namespace tessera::fuzz {

[[noreturn]] inline void finding(const char* target, const std::string& what) {
  std::fprintf(stderr, "fuzz_%s: finding: %s\n", target, what.c_str());
  std::abort();
}

/** Runs `parse` (the untrusted step): true when it accepted the input, false when it refused it
 * with a typed error; a finding otherwise. */
template <class F>
bool accepts(const char* target, F&& parse) {
  try {
    parse();
    return true;
  } catch (const InternalError& e) {
    finding(target, std::string("InternalError on bad input: ") + e.what());
  } catch (const Error&) {
    return false;
  } catch (const std::exception& e) {
    finding(target, std::string("untyped exception: ") + e.what());
  }
}

/** Runs a step that must not fail on accepted input (round trips); any exception is a finding. */
template <class F>
void must(const char* target, const char* step, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    finding(target, std::string(step) + ": " + e.what());
  }
}

}  // namespace tessera::fuzz
