// Capture, instantiation and replay of decode-step graphs (see cuda_graph.h).
#include "cuda_graph.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/check.h"

namespace inferlab::cuda_graph {

namespace {

constexpr std::size_t kFirstChunk = 64u << 10;

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

std::string error_text(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

// An instantiated graph and the host bytes its uploads read.
class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(cudaGraphExec_t exec, cudaStream_t stream, std::unique_ptr<HostSnapshots> snapshots)
      : exec_(exec), stream_(stream), snapshots_(std::move(snapshots)) {}
  // An in-flight replay is not cut short: CUDA frees an executing graph when it completes, and
  // freeing the pinned snapshots waits for the device.
  ~CudaStepGraph() override { (void)cudaGraphExecDestroy(exec_); }
  void replay() override { INFERLAB_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
  std::unique_ptr<HostSnapshots> snapshots_;
};

}  // namespace

HostSnapshots::HostSnapshots() {
  Chunk c;
  INFERLAB_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&c.data), kFirstChunk));
  c.bytes = kFirstChunk;
  chunks_.push_back(c);
}

HostSnapshots::~HostSnapshots() {
  for (const Chunk& c : chunks_) (void)cudaFreeHost(c.data);
}

void* HostSnapshots::copy(const void* src, std::size_t bytes) {
  const std::size_t need = align256(std::max<std::size_t>(bytes, 1));
  if (chunks_.back().used + need > chunks_.back().bytes) {
    Chunk c;
    c.bytes = std::max(need, 2 * chunks_.back().bytes);
    INFERLAB_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&c.data), c.bytes));
    chunks_.push_back(c);
  }
  Chunk& c = chunks_.back();
  char* at = c.data + c.used;
  if (bytes > 0) std::memcpy(at, src, bytes);
  c.used += need;
  return at;
}

void begin(cudaStream_t stream) { INFERLAB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed)); }

std::unique_ptr<StepGraph> end(cudaStream_t stream, std::unique_ptr<HostSnapshots> snapshots, bool ok,
                               std::string& reason) {
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (ended != cudaSuccess || graph == nullptr) {
    (void)cudaGetLastError();
    if (reason.empty()) reason = "cudaStreamEndCapture: " + error_text(ended);
    return nullptr;
  }
  std::unique_ptr<StepGraph> out;
  if (ok) {
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    if (made == cudaSuccess) {
      out = std::make_unique<CudaStepGraph>(exec, stream, std::move(snapshots));
    } else {
      (void)cudaGetLastError();
      reason = "cudaGraphInstantiate: " + error_text(made);
    }
  }
  (void)cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  return out;
}

void abort(cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr) (void)cudaGraphDestroy(graph);
  }
  (void)cudaGetLastError();  // an invalidated capture leaves its error behind: not sticky
}

}  // namespace inferlab::cuda_graph
