// safetensors: u64 header length, a JSON header {name: {dtype, shape, data_offsets}}, then the
// tensor bytes. The header is validated against the file size when opened. Private to core.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace inferlab::formats {

struct SafeTensor {
  std::string name;
  std::string dtype;                  // "F32", "F16", "BF16", ... (others are named in errors)
  std::vector<std::uint64_t> shape;   // PyTorch order: [out, in] for a linear
  std::uint64_t offset = 0;           // absolute file offset
  std::uint64_t bytes = 0;
  std::uint64_t elements() const;
};

class SafetensorsFile {
 public:
  // Parses and checks the header: every tensor's bytes lie in the data section and match
  // its dtype and shape. Throws Error("<path>: <problem>").
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, SafeTensor>& tensors() const { return tensors_; }
  const SafeTensor* find(const std::string& name) const;
  // The tensor converted to fp32 (F32, F16, BF16); Error naming the dtype otherwise.
  std::vector<float> read_f32(const SafeTensor& tensor) const;

 private:
  std::string path_;
  std::map<std::string, SafeTensor> tensors_;
};

}  // namespace inferlab::formats
