// gguf_dump_f32 FILE OUTDIR: every tensor of a GGUF file, read through the loader's reader and
// dequantiser (GgufFile::read_f32), written as OUTDIR/<tensor name>.f32 (little-endian float32,
// ne[0] fastest). tests/gguf/check_dequant.py compares these with the `gguf` Python package's
// dequantisation bit for bit. Errors: one line on stderr, exit 1.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "inferlab/error.h"
#include "inferlab/formats/formats.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: gguf_dump_f32 FILE.gguf OUTDIR\n";
    return 2;
  }
  try {
    const inferlab::GgufFile f = inferlab::GgufFile::open(argv[1]);
    for (const inferlab::GgufTensorInfo& t : f.tensors()) {
      const std::vector<float> v = f.read_f32(t);
      const std::string path = std::string(argv[2]) + "/" + t.name + ".f32";
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
      inferlab::check(static_cast<bool>(out), path + ": cannot write");
    }
  } catch (const std::exception& e) {
    std::cerr << "gguf_dump_f32: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
