// Shared by the libFuzzer targets: the loaders read paths, so each input is written to a file
// in a private memory-backed folder first; what a loader may throw for bad bytes is Error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace inferlab::fuzz {

// A folder under /dev/shm (or the temp dir) made once per process, removed at exit.
const std::string& scratch_dir();
// Writes bytes to scratch_dir()/name (truncating) and returns the path.
std::string write_input(const std::string& name, std::string_view bytes);
std::string_view as_text(const std::uint8_t* data, std::size_t size);

}  // namespace inferlab::fuzz
