// GGUF v2/v3 header reader: magic, version, metadata key-values (every value type, nested
// arrays), tensor infos, alignment and the data section offset. Every count is capped by the
// bytes left in the file before anything is allocated, so corrupt files fail with an Error.
#include <limits>

#include "formats/file_reader.h"
#include "inferlab/formats/formats.h"

namespace inferlab {

using formats::FileReader;

namespace {

constexpr std::uint32_t kMaxDims = 4;        // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;            // nested arrays beyond this are rejected

// Smallest encoded size of one value of the type: caps array lengths by the bytes left.
std::uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16: case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32: case GgufValueType::kInt32: case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64: case GgufValueType::kInt64: case GgufValueType::kFloat64: return 8;
    case GgufValueType::kString: return 8;   // length prefix
    case GgufValueType::kArray: return 12;   // item type + count
  }
  return 1;
}

bool valid_value_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(GgufValueType::kFloat64); }

std::string read_string(FileReader& r, const char* what) {
  const auto n = r.get<std::uint64_t>(what);
  return r.get_string(n, what);
}

GgufValue read_value(FileReader& r, GgufValueType type, const std::string& key, int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::kUint8: v.i = r.get<std::uint8_t>("u8 value"); break;
    case GgufValueType::kInt8: v.i = r.get<std::int8_t>("i8 value"); break;
    case GgufValueType::kUint16: v.i = r.get<std::uint16_t>("u16 value"); break;
    case GgufValueType::kInt16: v.i = r.get<std::int16_t>("i16 value"); break;
    case GgufValueType::kUint32: v.i = r.get<std::uint32_t>("u32 value"); break;
    case GgufValueType::kInt32: v.i = r.get<std::int32_t>("i32 value"); break;
    case GgufValueType::kUint64: v.i = static_cast<std::int64_t>(r.get<std::uint64_t>("u64 value")); break;
    case GgufValueType::kInt64: v.i = r.get<std::int64_t>("i64 value"); break;
    case GgufValueType::kFloat32: v.f = r.get<float>("f32 value"); break;
    case GgufValueType::kFloat64: v.f = r.get<double>("f64 value"); break;
    case GgufValueType::kBool: {
      const auto b = r.get<std::uint8_t>("bool value");
      if (b > 1) r.fail("metadata '" + key + "': bool value " + std::to_string(b) + " is not 0 or 1");
      v.i = b;
      break;
    }
    case GgufValueType::kString: v.str = read_string(r, "string value"); break;
    case GgufValueType::kArray: {
      if (depth >= kMaxArrayDepth) r.fail("metadata '" + key + "': arrays nested too deeply");
      const auto item = r.get<std::uint32_t>("array item type");
      if (!valid_value_type(item))
        r.fail("metadata '" + key + "': unknown array item type " + std::to_string(item));
      v.item_type = static_cast<GgufValueType>(item);
      const auto n = r.get<std::uint64_t>("array length");
      if (n > r.remaining() / min_value_bytes(v.item_type))
        r.fail("metadata '" + key + "': array length " + std::to_string(n) +
               " exceeds the bytes left in the file");
      const auto count = static_cast<std::size_t>(n);
      if (v.item_type == GgufValueType::kString) {
        v.strings.reserve(count);
        for (std::size_t k = 0; k < count; ++k) v.strings.push_back(read_string(r, "string item"));
      } else if (v.item_type == GgufValueType::kArray) {
        v.arrays.reserve(count);
        for (std::size_t k = 0; k < count; ++k)
          v.arrays.push_back(read_value(r, v.item_type, key, depth + 1));
      } else if (v.item_type == GgufValueType::kFloat32 || v.item_type == GgufValueType::kFloat64) {
        v.floats.reserve(count);
        for (std::size_t k = 0; k < count; ++k) v.floats.push_back(read_value(r, v.item_type, key, depth).f);
      } else {
        v.ints.reserve(count);
        for (std::size_t k = 0; k < count; ++k) v.ints.push_back(read_value(r, v.item_type, key, depth).i);
      }
      break;
    }
  }
  return v;
}

}  // namespace

// ---- GgufValue accessors ----------------------------------------------------------------------

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kUint16:
    case GgufValueType::kInt16: case GgufValueType::kUint32: case GgufValueType::kInt32:
    case GgufValueType::kUint64: case GgufValueType::kInt64: case GgufValueType::kBool:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const {
  return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64;
}

std::int64_t GgufValue::as_int(const std::string& key) const {
  if (!is_integer()) throw Error("metadata '" + key + "' is not an integer");
  return i;
}

double GgufValue::as_float(const std::string& key) const {
  if (is_float()) return f;
  if (is_integer()) return static_cast<double>(i);
  throw Error("metadata '" + key + "' is not a number");
}

const std::string& GgufValue::as_string(const std::string& key) const {
  if (type != GgufValueType::kString) throw Error("metadata '" + key + "' is not a string");
  return str;
}

std::size_t GgufValue::array_size() const {
  if (type != GgufValueType::kArray) return 0;
  return strings.size() + arrays.size() + floats.size() + ints.size();
}

const std::vector<std::string>& GgufValue::as_strings(const std::string& key) const {
  if (type != GgufValueType::kArray || item_type != GgufValueType::kString)
    throw Error("metadata '" + key + "' is not an array of strings");
  return strings;
}

std::vector<float> GgufValue::as_floats(const std::string& key) const {
  if (type != GgufValueType::kArray || item_type == GgufValueType::kString ||
      item_type == GgufValueType::kArray)
    throw Error("metadata '" + key + "' is not an array of numbers");
  std::vector<float> out;
  out.reserve(floats.size() + ints.size());
  for (double x : floats) out.push_back(static_cast<float>(x));
  for (std::int64_t x : ints) out.push_back(static_cast<float>(x));
  return out;
}

const std::vector<std::int64_t>& GgufValue::as_ints(const std::string& key) const {
  if (type != GgufValueType::kArray || item_type == GgufValueType::kString ||
      item_type == GgufValueType::kArray || item_type == GgufValueType::kFloat32 ||
      item_type == GgufValueType::kFloat64)
    throw Error("metadata '" + key + "' is not an array of integers");
  return ints;
}

std::uint64_t GgufTensorInfo::elements() const {
  std::uint64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

// ---- GgufFile -----------------------------------------------------------------------------------

GgufFile GgufFile::open(const std::string& path) {
  FileReader r(path);
  GgufFile g;
  g.path_ = path;
  g.file_size_ = r.size();

  char magic[4];
  r.read(magic, 4, "magic");
  if (std::string(magic, 4) != "GGUF") r.fail("not a GGUF file (bad magic)");
  g.version_ = r.get<std::uint32_t>("version");
  if (g.version_ != 2 && g.version_ != 3)
    r.fail("unsupported GGUF version " + std::to_string(g.version_) + " (supported: 2, 3)");
  const auto n_tensors = r.get<std::uint64_t>("tensor count");
  const auto n_kv = r.get<std::uint64_t>("metadata count");
  // A key-value needs >= 13 bytes (key length, type, smallest value), a tensor info >= 24.
  if (n_kv > r.remaining() / 13)
    r.fail("metadata count " + std::to_string(n_kv) + " exceeds the bytes left in the file");
  if (n_tensors > r.remaining() / 24)
    r.fail("tensor count " + std::to_string(n_tensors) + " exceeds the bytes left in the file");

  for (std::uint64_t k = 0; k < n_kv; ++k) {
    std::string key = read_string(r, "metadata key");
    const auto type = r.get<std::uint32_t>("metadata value type");
    if (!valid_value_type(type))
      r.fail("metadata '" + key + "': unknown value type " + std::to_string(type));
    GgufValue v = read_value(r, static_cast<GgufValueType>(type), key, 0);
    if (!g.metadata_.emplace(key, std::move(v)).second) r.fail("duplicate metadata key '" + key + "'");
  }
  if (const GgufValue* a = g.find("general.alignment")) {
    if (!a->is_integer() || a->i <= 0 || (a->i & (a->i - 1)) != 0 || a->i > (1 << 20))
      r.fail("general.alignment must be a power of two, got " +
             (a->is_integer() ? std::to_string(a->i) : std::string("a non-integer")));
    g.alignment_ = static_cast<std::uint64_t>(a->i);
  }

  std::vector<std::uint64_t> relative;
  g.tensors_.reserve(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t t = 0; t < n_tensors; ++t) {
    GgufTensorInfo info;
    info.name = read_string(r, "tensor name");
    const auto n_dims = r.get<std::uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      r.fail("tensor '" + info.name + "': " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = r.get<std::uint64_t>("tensor dimension");
      if (ne == 0 || ne > (std::uint64_t{1} << 40) || elements > (std::uint64_t{1} << 42) / ne)
        r.fail("tensor '" + info.name + "': absurd dimension " + std::to_string(ne));
      elements *= ne;
      info.dims.push_back(ne);
    }
    info.type = r.get<std::uint32_t>("tensor type");
    relative.push_back(r.get<std::uint64_t>("tensor offset"));
    if (ggml_type_supported(info.type)) {
      const auto type = static_cast<GgmlType>(info.type);
      if (info.dims[0] % ggml_block_elements(type) != 0)
        r.fail("tensor '" + info.name + "': row of " + std::to_string(info.dims[0]) +
               " elements is not a multiple of the " + ggml_type_name(info.type) + " block size");
      info.bytes = ggml_tensor_bytes(type, elements);
    }
    if (!g.tensor_index_.emplace(info.name, g.tensors_.size()).second)
      r.fail("duplicate tensor '" + info.name + "'");
    g.tensors_.push_back(std::move(info));
  }

  const std::uint64_t header_end = r.pos();
  g.data_offset_ = (header_end + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  for (std::size_t t = 0; t < g.tensors_.size(); ++t) {
    GgufTensorInfo& info = g.tensors_[t];
    if (relative[t] % g.alignment_ != 0)
      r.fail("tensor '" + info.name + "': data offset " + std::to_string(relative[t]) +
             " is not aligned to " + std::to_string(g.alignment_));
    if (relative[t] > g.file_size_ || g.data_offset_ > g.file_size_ - relative[t])
      r.fail("tensor '" + info.name + "': data offset lies past the end of the file");
    info.offset = g.data_offset_ + relative[t];
    if (info.bytes > g.file_size_ - info.offset)
      r.fail("tensor '" + info.name + "': data (" + std::to_string(info.bytes) + " bytes at offset " +
             std::to_string(info.offset) + ") runs past the end of the file (" +
             std::to_string(g.file_size_) + " bytes)");
  }
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<std::uint8_t> GgufFile::read_bytes(const GgufTensorInfo& tensor) const {
  if (!ggml_type_supported(tensor.type))
    throw Error(path_ + ": tensor '" + tensor.name + "' has unsupported type " +
                ggml_type_name(tensor.type) + " (supported: " + ggml_supported_type_names() + ")");
  FileReader r(path_);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(tensor.bytes));
  r.read_at(tensor.offset, bytes.data(), tensor.bytes);
  return bytes;
}

std::vector<float> GgufFile::read_f32(const GgufTensorInfo& tensor) const {
  const std::vector<std::uint8_t> bytes = read_bytes(tensor);
  std::vector<float> out(static_cast<std::size_t>(tensor.elements()));
  dequantize(static_cast<GgmlType>(tensor.type), bytes.data(), out.size(), out.data());
  return out;
}

}  // namespace inferlab
