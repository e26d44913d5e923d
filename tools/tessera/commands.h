#pragma once

#include "tessera/tessera.h"

namespace tessera::cli {

int doctor();
int demo();

}  // namespace tessera::cli
