#include "tessera/version.h"

namespace tessera {

const char* version() {
  return TESSERA_VERSION;
}

const std::string& build_id() {
  static const std::string id = std::string(TESSERA_VERSION) + "+" + __DATE__ + " " + __TIME__;
  return id;
}

}  // namespace tessera
