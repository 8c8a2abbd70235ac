// The one compiled copy of toml++ (the build defines TOML_HEADER_ONLY=0 everywhere; see the
// top-level CMakeLists.txt): every other file that reads TOML includes only its declarations.
#define TOML_IMPLEMENTATION
#include "inferlab/experiment/tomlpp.h"
