// The paged KV cache as one object for tests of both halves together: a BlockManager whose
// copy-on-write copies are applied at once to a KvStorage on a one-thread CPU device, so a
// test can write K/V by hand, fork, write again and read back through the layer views.
#pragma once
#include <memory>
#include <vector>

#include "inferlab/device/device.h"
#include "inferlab/kv/kv_cache.h"
#include "inferlab/model/model_config.h"

namespace inferlab::testing {

class PagedKv : public BlockManager {
 public:
  PagedKv(const ModelConfig& model, const KvCacheConfig& config)
      : BlockManager(config),
        device_(std::make_unique<CpuDevice>(1)),
        storage_(*device_, model, config.num_blocks, config.block_size) {}

  // BlockManager::reserve, with the block copies made in the storage at once.
  bool reserve(int seq, int tokens) {
    std::vector<BlockCopy> copies;
    if (!BlockManager::reserve(seq, tokens, copies)) return false;
    storage_.copy_blocks(copies);
    copies_made_ += static_cast<int>(copies.size());
    return true;
  }
  KvLayerView layer(int l) const { return storage_.layer(l); }
  float* k_slot(int l, int slot) { return storage_.k_slot(l, slot); }
  float* v_slot(int l, int slot) { return storage_.v_slot(l, slot); }
  std::uint64_t bytes() const { return storage_.bytes(); }
  KvStorage& storage() { return storage_; }
  int copies_made() const { return copies_made_; }

 private:
  std::unique_ptr<CpuDevice> device_;
  KvStorage storage_;
  int copies_made_ = 0;
};

}  // namespace inferlab::testing
