#!/usr/bin/env bash
# Builds llama.cpp's CUDA backend (the GPU peer of scripts/gpu_check.sh) from the source
# distribution of PyPI's llama-cpp-python, OUTSIDE the repository, and packs the two programs the
# side-by-side table runs (llama-bench, llama-batched-bench) with their shared libraries into one
# compressed file that the device tool can carry beside inferlab's pack (64 MiB in all).
#
#   scripts/build_llama_cuda_peer.sh [out_dir]        (default: build-peer, ignored by git)
# Environment:
#   LLAMA_CPP_PYTHON_VERSION  the sdist's version (default 0.3.36, the CPU peer of docs/performance.md)
#   INFERLAB_PEERS            where the sdist is unpacked and built (default ~/.cache/inferlab/peers)
#   PEER_JOBS                 ninja's -j (default 2: this machine has two shared cores)
#   PEER_NICE                 nice level of the build (default 19)
#
# What it builds: -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 (H100/H200 machine code only,
# compressed fatbins), GGML_NATIVE=OFF (the GPU machine's CPU may lack this one's AVX-512),
# shared libraries (one copy of libggml-cuda for both programs), only the targets llama-bench and
# llama-batched-bench. The programs are linked with -Wl,--allow-shlib-undefined: libggml-cuda
# needs libcuda.so.1, which only the GPU machine's driver provides. Everything is stripped and the
# folder is packed as out_dir/llama-cuda.tar.xz (bin/, lib/, VERSION); gpu_check.sh unpacks it
# into /tmp on the GPU machine and runs the programs with LD_LIBRARY_PATH set to its lib/.
#
# The device tool call then carries both folders:
#   run(command="bash scripts/gpu_check.sh build-gpu", carry=["build-gpu", "build-peer"])
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/build-peer}"
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
peers="${INFERLAB_PEERS:-$HOME/.cache/inferlab/peers}"
jobs="${PEER_JOBS:-2}"
nice_level="${PEER_NICE:-19}"
sdist="$peers/llama_cpp_python-$version.tar.gz"
src="$peers/llama_cpp_python-$version/vendor/llama.cpp"
build="$peers/llama-cuda-$version"

case "$(cd "$peers" 2>/dev/null && pwd)/" in
  "$root"/*) echo "build_llama_cuda_peer: INFERLAB_PEERS=$peers is inside the repository; build the peer outside it" >&2; exit 1 ;;
esac
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
  { echo "build_llama_cuda_peer: no nvcc (CUDA toolkit) on this machine" >&2; exit 1; }
export PATH="$PATH:/usr/local/cuda/bin"
mkdir -p "$peers" "$out"

if [ ! -f "$sdist" ]; then
  # --no-binary: the source distribution (it vendors llama.cpp); pip prepares its metadata, which
  # installs the build backend into a throw-away environment first (a minute or two).
  python3 -m pip download --no-binary :all: --no-deps "llama-cpp-python==$version" -d "$peers" ||
    { echo "build_llama_cuda_peer: could not download llama-cpp-python==$version from PyPI" >&2; exit 1; }
fi
[ -f "$src/CMakeLists.txt" ] || tar xzf "$sdist" -C "$peers" "llama_cpp_python-$version/vendor/llama.cpp"

cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=ON \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,--allow-shlib-undefined" >"$build.configure.log" 2>&1 ||
  { tail -n 30 "$build.configure.log" >&2; exit 1; }
t0=$SECONDS
nice -n "$nice_level" cmake --build "$build" -j "$jobs" --target llama-bench llama-batched-bench
echo "build_llama_cuda_peer: built in $((SECONDS - t0)) s"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/llama-cuda/bin" "$stage/llama-cuda/lib"
cp "$build/bin/llama-bench" "$build/bin/llama-batched-bench" "$stage/llama-cuda/bin/"
# The shared libraries the programs load from the build (libllama, libggml*, libmtmd if linked):
# resolved through ldd so that nothing the build made is missed and nothing else is packed.
for f in "$stage"/llama-cuda/bin/*; do
  LD_LIBRARY_PATH="$build/bin:$build/src:$build/ggml/src" ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(readlink -f "$lib")" in "$build"/*) cp -L "$lib" "$stage/llama-cuda/lib/" ;; esac
done
strip --strip-unneeded "$stage"/llama-cuda/bin/* "$stage"/llama-cuda/lib/*
echo "llama-cpp-python $version ($(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo sdist)), GGML_CUDA sm_90" \
  >"$stage/llama-cuda/VERSION"
XZ_OPT=-9e tar -C "$stage" -cJf "$out/llama-cuda.tar.xz" llama-cuda

raw_kib=$(du -sk "$stage/llama-cuda" | cut -f1)
xz_kib=$(($(stat -c %s "$out/llama-cuda.tar.xz") / 1024))
echo "build_llama_cuda_peer: $out/llama-cuda.tar.xz: $((xz_kib / 1024)) MiB ($xz_kib KiB; stripped folder $((raw_kib / 1024)) MiB)"
du -sh "$stage"/llama-cuda/bin/* "$stage"/llama-cuda/lib/* | sort -h
if [ "$xz_kib" -gt $((40 * 1024)) ]; then
  echo "build_llama_cuda_peer: over 40 MiB: with inferlab's pack it would not fit the device tool's 64 MiB" >&2
  exit 1
fi
