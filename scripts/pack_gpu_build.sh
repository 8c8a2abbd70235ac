#!/usr/bin/env bash
# Packs a CUDA build for a GPU machine that has CUDA 13.0 (driver, cuBLAS) but none of this
# project's other libraries (Boost, TOML++, GoogleTest, PCRE2): the programs, the plugins, the
# non-system shared libraries they load (found with ldd) and the small shared data the CUDA tests
# read, in one folder that runs from anywhere through its wrapper `run`, under 64 MiB (what the
# device tool carries besides the working tree).
#
#   scripts/pack_gpu_build.sh [build_dir] [pack_dir] [--xz]   (defaults: build, build-gpu)
# --xz: pack_dir then holds only pack.tar.xz (the same folder, compressed: about a third of the
# size, so that llama.cpp's CUDA peer fits beside it in one carry); gpu_check.sh unpacks it on
# the GPU machine.
# The build must be portable: cmake -S . -B build-portable -G Ninja -DCMAKE_BUILD_TYPE=Release
#   -DINFERLAB_NATIVE=OFF -DINFERLAB_CUDA=ON && ninja -C build-portable (then pass build-portable).
#
# Layout: pack/bin (inferlab, test_cuda, cuda_roofline, the f16/bf16/gguf plugin tests),
# pack/lib (libinferlab_core + its non-system libraries), pack/lib/inferlab (plugins: the
# registry finds them beside libinferlab_core), pack/data (stories260K), pack/run (a wrapper that
# sets LD_LIBRARY_PATH to pack/lib, the CUDA library folders, INFERLAB_DATA and
# INFERLAB_PLUGIN_PATH). libcuda, cuBLAS and the CUDA runtime are NOT packed: the GPU machine's
# own are used (cudart is linked statically anyway).
#
# The device tool call that uses it (the pack folder matches .gitignore's /build*/, so it must
# be carried; the working tree itself must stay under 64 MiB with it):
#   run(command="bash scripts/gpu_check.sh build-gpu", carry=["build-gpu"], timeout_s=540)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
xz=0
args=()
for a in "$@"; do if [ "$a" = --xz ]; then xz=1; else args+=("$a"); fi; done
set -- ${args[@]+"${args[@]}"}
build="$(cd "${1:-$root/build}" && pwd)"
pack="${2:-$root/build-gpu}"
data="${INFERLAB_DATA:-$root/../shared}"

[ -x "$build/bin/inferlab" ] || { echo "pack_gpu_build: no $build/bin/inferlab (build first)" >&2; exit 1; }
[ -f "$build/bin/test_cuda" ] || { echo "pack_gpu_build: $build has no test_cuda: not a CUDA build (INFERLAB_CUDA=ON)" >&2; exit 1; }
# -march=native code of this machine (AVX-512 + VNNI here) may not run on the GPU machine's CPU:
# the pack must come from a portable build (cmake -DINFERLAB_NATIVE=OFF -DINFERLAB_CUDA=ON).
if grep -q '^INFERLAB_NATIVE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "pack_gpu_build: $build was configured with INFERLAB_NATIVE=ON (-march=native); configure a build with -DINFERLAB_NATIVE=OFF for another machine's CPU" >&2
  exit 1
fi
rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/lib/inferlab" "$pack/data/models"

programs=(inferlab test_cuda cuda_roofline test_quantization_f16 test_quantization_bf16 test_quantization_gguf)
# cuda-kernels: the attention/quantized-linear kernel tests, the conformance suites, their roofline.
programs+=(test_cuda_kernels test_conformance cuda_kernel_roofline)
# Every CUDA test binary (test_cuda*: the graphs, fused-kernel, tensor-core and GGUF-on-CUDA
# tests land as test_cuda_<area>), which gpu_check.sh runs whole.
for f in "$build"/bin/test_cuda*; do [ -x "$f" ] && programs+=("$(basename "$f")"); done
for p in $(printf '%s\n' "${programs[@]}" | sort -u); do
  [ -f "$build/bin/$p" ] && cp "$build/bin/$p" "$pack/bin/"
done
cp "$build"/lib/libinferlab_core.so* "$pack/lib/"
cp "$build"/lib/inferlab/*.so "$pack/lib/inferlab/"
strip --strip-unneeded "$pack"/bin/* "$pack"/lib/*.so* "$pack"/lib/inferlab/*.so 2>/dev/null || true

# Non-system libraries: everything ldd resolves except the C library family and CUDA's own.
# libstdc++ and libgcc_s are packed: the GPU machine's may be older than this compiler's.
system='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libcuda\.|libcublas|libcublasLt|libcudart|libnvidia)'
for f in "$pack"/bin/* "$pack"/lib/*.so* "$pack"/lib/inferlab/*.so; do
  LD_LIBRARY_PATH="$pack/lib:${LD_LIBRARY_PATH:-}" ldd "$f" 2>/dev/null | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ ! "$name" =~ $system ]] && [ ! -e "$pack/lib/$name" ]; then cp -L "$path" "$pack/lib/$name"; fi
done

[ -d "$data/models/stories260K" ] && cp -r "$data/models/stories260K" "$pack/data/models/"
# The GGUF fixtures test_quantization_gguf's CUDA cases read ($INFERLAB_DATA/gguf, 1.7 MiB).
mkdir -p "$pack/data/gguf" && cp "$root"/tests/data/gguf/*.gguf "$pack/data/gguf/"

cat > "$pack/run" <<'WRAP'
#!/usr/bin/env bash
# Runs a packed program: pack/run PROGRAM [ARGS...] (PROGRAM from pack/bin).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cuda_libs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
done
# cuBLAS from a pip-installed PyTorch (nvidia-cublas wheel), when the system has none.
if ! ls /usr/local/cuda/lib*/libcublas.so.13* >/dev/null 2>&1; then
  for d in $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cublas", "lib") for p in nvidia.__path__))' 2>/dev/null); do
    [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
  done
fi
export LD_LIBRARY_PATH="$here/lib$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export INFERLAB_DATA="${INFERLAB_DATA:-$here/data}"
export INFERLAB_PLUGIN_PATH="${INFERLAB_PLUGIN_PATH:-$here/lib/inferlab}"
prog="$1"
shift
# A path runs as it is (gpu_check.sh runs the llama.cpp peer's programs with these libraries).
case "$prog" in */*) exec "$prog" "$@" ;; esac
exec "$here/bin/$prog" "$@"
WRAP
chmod +x "$pack/run"

size_kib=$(du -sk "$pack" | cut -f1)
echo "pack_gpu_build: $pack, $((size_kib / 1024)) MiB:"
du -sh "$pack"/bin/* "$pack"/lib/* 2>/dev/null | sort -h | tail -8
if ((xz)); then
  # The folder, compressed into itself: pack/pack.tar.xz holds bin/, lib/, data/ and run.
  tmp="$(mktemp -d)"
  XZ_OPT=-9e tar -C "$pack" -cJf "$tmp/pack.tar.xz" .
  rm -rf "$pack"
  mkdir -p "$pack"
  mv "$tmp/pack.tar.xz" "$pack/"
  rmdir "$tmp"
  size_kib=$(du -sk "$pack" | cut -f1)
  echo "pack_gpu_build: compressed to $pack/pack.tar.xz, $((size_kib / 1024)) MiB ($size_kib KiB)"
fi
if [ "$size_kib" -gt $((60 * 1024)) ]; then
  echo "pack_gpu_build: over 60 MiB: the device tool carries 64 MiB with the working tree" >&2
  exit 1
fi
