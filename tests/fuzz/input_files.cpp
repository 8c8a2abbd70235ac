#include "input_files.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "inferlab/support/log.h"

namespace inferlab::fuzz {

namespace fs = std::filesystem;

const std::string& scratch_dir() {
  // Never destroyed: the exit handler that removes the folder runs after static destructors.
  static const std::string* const dir = [] {
    std::error_code ec;
    const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    const fs::path p = base / ("inferlab_fuzz_" + std::to_string(::getpid()));
    fs::create_directories(p);
    // Loaders warn about inputs they adjust; the fuzzer's own output is what matters.
    log::set_level(log::Level::kError);
    std::atexit([] {
      std::error_code e;
      fs::remove_all(*dir, e);
    });
    return new std::string(p.string());
  }();
  return *dir;
}

std::string write_input(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace inferlab::fuzz
