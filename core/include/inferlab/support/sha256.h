// SHA-256 (FIPS 180-4) of a file's bytes, for provenance records (the manifest's plugin libraries):
// a digest anyone can recompute with `sha256sum`.
#pragma once
#include <string>
#include <string_view>

namespace inferlab {

// 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);
// The digest of a file's bytes; "" when it cannot be read.
std::string file_sha256(const std::string& path);

}  // namespace inferlab
