// The CUDA half of decode-step graphs (inferlab/device/step_graph.h): stream capture into a
// graph, its instantiation and replay, and the pinned host snapshots that the graph's uploads
// read. Internal to the CUDA device (cuda_device.cu); compiled only in a CUDA build.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/device/step_graph.h"

namespace inferlab::cuda_graph {

// Pinned host copies of what a capture uploads: a captured host-to-device copy reads its source
// address at every replay, so the bytes must live (unchanged) as long as the graph does. Chunks
// grow geometrically; the first is allocated before the capture begins.
class HostSnapshots {
 public:
  HostSnapshots();
  ~HostSnapshots();
  HostSnapshots(const HostSnapshots&) = delete;
  HostSnapshots& operator=(const HostSnapshots&) = delete;
  // A pinned copy of `bytes` bytes of `src`, 256-byte aligned.
  void* copy(const void* src, std::size_t bytes);

 private:
  struct Chunk {
    char* data = nullptr;
    std::size_t bytes = 0, used = 0;
  };
  std::vector<Chunk> chunks_;
};

// Starts capturing `stream` (relaxed mode: the caching pool may still be asked, and the device
// checks it was not).
void begin(cudaStream_t stream);
// Ends the capture. `ok` false (memory was allocated or freed inside, `reason` says how): the
// graph is discarded and null returned. Otherwise the instantiated graph, which owns `snapshots`
// and replays on `stream`; null with `reason` when CUDA refuses to end or instantiate it.
std::unique_ptr<StepGraph> end(cudaStream_t stream, std::unique_ptr<HostSnapshots> snapshots, bool ok,
                               std::string& reason);
// Ends a capture an exception interrupted, discarding the graph; never throws.
void abort(cudaStream_t stream) noexcept;

}  // namespace inferlab::cuda_graph
