#pragma once

#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::cli {

int doctor();
int demo();
int cache(const std::string& what);
int tune_db(const std::vector<std::string>& args);
int chart(const std::vector<std::string>& args);
int aot(const std::vector<std::string>& args);

}  // namespace tessera::cli
