// safetensors reader: header parsed with Boost.JSON (json.h; a tensor named twice keeps its last
// entry, as in the reference reader), every offset checked against the file before any tensor is read.
#include "formats/safetensors.h"

#include <cstring>

#include "formats/file_reader.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "formats/json.h"

namespace inferlab::formats {

namespace {

constexpr std::uint64_t kMaxHeader = 100ull << 20;  // the format's own limit (100 MB)

// Bytes per element of a safetensors dtype; 0 for an unknown dtype.
std::uint64_t dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

}  // namespace

std::uint64_t SafeTensor::elements() const {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  FileReader r(path);
  SafetensorsFile f;
  f.path_ = path;
  const auto header_len = r.get<std::uint64_t>("header length");
  if (header_len > r.remaining())
    r.fail("header length " + std::to_string(header_len) + " exceeds the file size " + std::to_string(r.size()));
  if (header_len > kMaxHeader) r.fail("header length " + std::to_string(header_len) + " exceeds 100 MB");
  const std::string header = r.get_string(header_len, "header");
  const std::uint64_t data_start = r.pos();
  const std::uint64_t data_size = r.size() - data_start;
  const json::value doc = parse_json(header, path + " (header)");
  if (!doc.is_object()) r.fail("header is not a JSON object");
  for (const auto& member : doc.get_object()) {
    const std::string name(member.key());
    const json::value& entry = member.value();
    if (name == "__metadata__") continue;
    const std::string what = path + ": tensor '" + name + "'";
    if (!entry.is_object()) r.fail("tensor '" + name + "' entry is not an object");
    const json::value* dtype = json_find(entry, "dtype");
    const json::value* shape = json_find(entry, "shape");
    const json::value* offsets = json_find(entry, "data_offsets");
    if (!dtype || !shape || !offsets) r.fail("tensor '" + name + "' lacks dtype, shape or data_offsets");
    SafeTensor t;
    t.name = name;
    t.dtype = json_string(*dtype, what + " dtype");
    std::uint64_t elements = 1;
    for (const json::value& d : json_array(*shape, what + " shape")) {
      const std::int64_t n = json_int(d, what + " shape");
      if (n < 0 || n > (1ll << 40)) r.fail("tensor '" + name + "' has an absurd dimension " + std::to_string(n));
      const auto un = static_cast<std::uint64_t>(n);
      if (un != 0 && elements > (std::uint64_t{1} << 42) / un)
        r.fail("tensor '" + name + "' has an absurd element count");
      elements *= un;
      t.shape.push_back(un);
    }
    const auto& off = json_array(*offsets, what + " data_offsets");
    if (off.size() != 2) r.fail("tensor '" + name + "' data_offsets must be [begin, end]");
    const std::int64_t begin = json_int(off[0], what + " data_offsets"), end = json_int(off[1], what + " data_offsets");
    if (begin < 0 || end < begin || static_cast<std::uint64_t>(end) > data_size)
      r.fail("tensor '" + name + "' data [" + std::to_string(begin) + ", " + std::to_string(end) +
             ") lies outside the " + std::to_string(data_size) + " data bytes (truncated file?)");
    t.offset = data_start + static_cast<std::uint64_t>(begin);
    t.bytes = static_cast<std::uint64_t>(end - begin);
    const std::uint64_t esize = dtype_size(t.dtype);
    if (esize != 0 && t.bytes != elements * esize)
      r.fail("tensor '" + name + "' has " + std::to_string(t.bytes) + " bytes, its " + t.dtype + " shape needs " +
             std::to_string(elements * esize));
    f.tensors_.emplace(name, std::move(t));
  }
  return f;
}

const SafeTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<float> SafetensorsFile::read_f32(const SafeTensor& t) const {
  GgmlType type;
  if (t.dtype == "F32") type = GgmlType::kF32;
  else if (t.dtype == "F16") type = GgmlType::kF16;
  else if (t.dtype == "BF16") type = GgmlType::kBF16;
  else
    throw Error(path_ + ": tensor '" + t.name + "' has unsupported dtype " + t.dtype + " (supported: F32, F16, BF16)");
  FileReader r(path_);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(t.bytes));
  r.read_at(t.offset, bytes.data(), t.bytes);
  std::vector<float> out(static_cast<std::size_t>(t.elements()));
  dequantize(type, bytes.data(), out.size(), out.data());
  return out;
}

}  // namespace inferlab::formats
