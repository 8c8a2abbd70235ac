// Test helpers that write small GGUF and safetensors files with known contents, and encode
// GGML blocks from known quants (so dequantisation can be checked against exact values).
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/formats/formats.h"

namespace inferlab::testing {

inline void append_raw(std::string& out, const void* p, std::size_t n) {
  out.append(static_cast<const char*>(p), n);
}
template <typename T>
void append_pod(std::string& out, T v) {
  append_raw(out, &v, sizeof(T));
}
inline void append_gguf_string(std::string& out, const std::string& s) {
  append_pod<std::uint64_t>(out, s.size());
  out += s;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A fresh scratch folder under the system temp dir, removed by the destructor.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    // Memory-backed when available: the fuzz tests write thousands of small files.
    std::error_code ec;
    const std::filesystem::path base =
        std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm")
                                                      : std::filesystem::temp_directory_path();
    path = base /
           ("inferlab_" + tag + "_" + std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// Builds a GGUF file: metadata values are written pre-encoded (type id + payload).
class GgufBuilder {
 public:
  explicit GgufBuilder(std::uint32_t version = 3) : version_(version) {}

  void u32(const std::string& key, std::uint32_t v) { put(key, 4, pod(v)); }
  void i32(const std::string& key, std::int32_t v) { put(key, 5, pod(v)); }
  void f32(const std::string& key, float v) { put(key, 6, pod(v)); }
  void boolean(const std::string& key, bool v) { put(key, 7, pod<std::uint8_t>(v ? 1 : 0)); }
  void u64(const std::string& key, std::uint64_t v) { put(key, 10, pod(v)); }
  void string(const std::string& key, const std::string& v) {
    std::string p;
    append_gguf_string(p, v);
    put(key, 8, p);
  }
  void strings(const std::string& key, const std::vector<std::string>& v) {
    std::string p = pod<std::uint32_t>(8) + pod<std::uint64_t>(v.size());
    for (const auto& s : v) append_gguf_string(p, s);
    put(key, 9, p);
  }
  void floats(const std::string& key, const std::vector<float>& v) {
    std::string p = pod<std::uint32_t>(6) + pod<std::uint64_t>(v.size());
    for (float x : v) append_pod(p, x);
    put(key, 9, p);
  }
  void ints(const std::string& key, const std::vector<std::int32_t>& v) {
    std::string p = pod<std::uint32_t>(5) + pod<std::uint64_t>(v.size());
    for (auto x : v) append_pod(p, x);
    put(key, 9, p);
  }
  // Any pre-encoded value (for exotic types and nested arrays).
  void raw(const std::string& key, std::uint32_t type, const std::string& payload) { put(key, type, payload); }

  void tensor(const std::string& name, std::vector<std::uint64_t> dims, GgmlType type, std::string data) {
    tensors_.push_back({name, std::move(dims), static_cast<std::uint32_t>(type), std::move(data)});
  }
  void tensor_f32(const std::string& name, std::vector<std::uint64_t> dims, const std::vector<float>& v) {
    std::string data;
    append_raw(data, v.data(), v.size() * sizeof(float));
    tensor(name, std::move(dims), GgmlType::kF32, std::move(data));
  }
  void tensor_raw_type(const std::string& name, std::vector<std::uint64_t> dims, std::uint32_t type, std::string data) {
    tensors_.push_back({name, std::move(dims), type, std::move(data)});
  }

  std::string build(std::uint64_t alignment = 32) const {
    std::string out = "GGUF";
    append_pod(out, version_);
    append_pod<std::uint64_t>(out, tensors_.size());
    append_pod<std::uint64_t>(out, kv_.size());
    for (const auto& [key, type, payload] : kv_) {
      append_gguf_string(out, key);
      append_pod(out, type);
      out += payload;
    }
    std::uint64_t offset = 0;
    std::vector<std::uint64_t> offsets;
    for (const auto& t : tensors_) {
      append_gguf_string(out, t.name);
      append_pod<std::uint32_t>(out, static_cast<std::uint32_t>(t.dims.size()));
      for (auto d : t.dims) append_pod(out, d);
      append_pod(out, t.type);
      append_pod(out, offset);
      offsets.push_back(offset);
      offset += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    const std::size_t data_start = out.size();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      out.resize(data_start + offsets[i], '\0');
      out += tensors_[i].data;
    }
    return out;
  }

 private:
  template <typename T>
  static std::string pod(T v) {
    std::string s;
    append_pod(s, v);
    return s;
  }
  void put(const std::string& key, std::uint32_t type, const std::string& payload) {
    kv_.push_back({key, type, payload});
  }
  struct Kv {
    std::string key;
    std::uint32_t type;
    std::string payload;
  };
  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> dims;
    std::uint32_t type;
    std::string data;
  };
  std::uint32_t version_;
  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
};

// GGML blocks from known quants: q holds one value per element (int8 for Q8_0, nibble 0..15 for
// Q4_*); d and m are fp16 bit patterns.
inline std::string encode_q8_0(const std::vector<std::int8_t>& q, std::uint16_t d) {
  std::string out;
  for (std::size_t b = 0; b < q.size() / 32; ++b) {
    append_pod(out, d);
    append_raw(out, q.data() + 32 * b, 32);
  }
  return out;
}
inline std::string encode_q4(const std::vector<std::uint8_t>& nib, std::uint16_t d, const std::uint16_t* m) {
  std::string out;
  for (std::size_t b = 0; b < nib.size() / 32; ++b) {
    append_pod(out, d);
    if (m) append_pod(out, *m);
    for (std::size_t j = 0; j < 16; ++j)
      out += static_cast<char>(nib[32 * b + j] | (nib[32 * b + j + 16] << 4));  // low: 0..15, high: 16..31
  }
  return out;
}

// Writes a safetensors file: tensors are (name, dtype, shape, raw bytes), laid out in order.
struct SafeTensorSpec {
  std::string name, dtype;
  std::vector<std::uint64_t> shape;
  std::string data;
};
inline std::string build_safetensors(const std::vector<SafeTensorSpec>& tensors) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    header += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.data.size()) + "]}";
    offset += t.data.size();
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::string out;
  append_pod<std::uint64_t>(out, header.size());
  out += header;
  for (const auto& t : tensors) out += t.data;
  return out;
}

}  // namespace inferlab::testing
