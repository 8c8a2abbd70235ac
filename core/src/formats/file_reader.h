// A bounds-checked sequential reader over a file: every read is checked against the file size
// before any allocation, so a corrupt length can neither read past the end nor allocate more
// than the file holds. Errors name the file and the offset. Private to core.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"

namespace inferlab::formats {

class FileReader {
 public:
  explicit FileReader(const std::string& path) : path_(path) {
    require_regular_file(path, "a model, tokenizer or JSON file");  // a FIFO would block in open
    in_.open(path, std::ios::binary);
    if (!in_) throw Error(path + ": cannot open file");
    in_.seekg(0, std::ios::end);
    const std::streamoff end = in_.tellg();
    if (end < 0) throw Error(path + ": cannot determine file size");
    size_ = static_cast<std::uint64_t>(end);
    in_.seekg(0, std::ios::beg);
  }

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }
  std::uint64_t pos() const { return pos_; }
  std::uint64_t remaining() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& problem) const { throw Error(path_ + ": " + problem); }

  // Reads n bytes at the current position; "truncated" error if fewer remain.
  void read(void* dst, std::uint64_t n, const char* what) {
    if (n > remaining())
      fail("truncated: " + std::string(what) + " needs " + std::to_string(n) + " bytes at offset " +
           std::to_string(pos_) + ", file has " + std::to_string(size_));
    read_at(pos_, dst, n);
    pos_ += n;
  }
  // Reads n bytes at an absolute offset without moving the cursor.
  void read_at(std::uint64_t offset, void* dst, std::uint64_t n) {
    if (offset > size_ || n > size_ - offset)
      fail("truncated: " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
           " run past the end (" + std::to_string(size_) + " bytes)");
    if (n == 0) return;
    if (offset != stream_pos_) {  // sequential reads skip the seek and use the stream's buffer
      in_.clear();
      in_.seekg(static_cast<std::streamoff>(offset));
    }
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (!in_) {
      stream_pos_ = ~std::uint64_t{0};
      fail("read error at offset " + std::to_string(offset));
    }
    stream_pos_ = offset + n;
  }
  template <typename T>
  T get(const char* what) {
    T v;
    read(&v, sizeof(T), what);
    return v;  // little-endian host assumed (x86-64, aarch64)
  }
  std::string get_string(std::uint64_t n, const char* what) {
    if (n > remaining())
      fail("truncated: " + std::string(what) + " of " + std::to_string(n) + " bytes at offset " +
           std::to_string(pos_) + ", file has " + std::to_string(size_));
    std::string s(static_cast<std::size_t>(n), '\0');
    read(s.data(), n, what);
    return s;
  }
  void seek(std::uint64_t offset) {
    if (offset > size_) fail("offset " + std::to_string(offset) + " is past the end");
    pos_ = offset;
  }

 private:
  std::string path_;
  std::ifstream in_;
  std::uint64_t size_ = 0;
  std::uint64_t pos_ = 0;
  std::uint64_t stream_pos_ = 0;  // where the ifstream's get pointer is
};

}  // namespace inferlab::formats
