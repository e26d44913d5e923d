#pragma once

#include <string>

#include "tessera/tessera.h"

namespace tessera::cli {

int doctor();
int demo();
int cache(const std::string& what);

}  // namespace tessera::cli
