// First come first served, up to max_batch requests at once, each admitted only when its whole
// life fits the blocks nobody else has claimed, so a running request never stalls.
#include "inferlab/plugin/plugin.h"

namespace {

using namespace inferlab;

int life(const SeqView& s) { return s.prompt_len + s.max_output - 1; }  // last token never fed back

class FcfsScheduler : public Scheduler {
 public:
  explicit FcfsScheduler(int max_batch) : max_batch_(max_batch) {}

  ScheduleDecision schedule(const SchedulerInput& in) override {
    ScheduleDecision d;
    int free = in.free_blocks;
    for (const SeqView& s : in.running) {  // the rest of each running life stays claimed
      free -= in.blocks_to_grow(s, life(s) - s.num_computed);
      d.scheduled.push_back({s.id, s.pending()});
    }
    for (const SeqView& s : in.waiting) {  // arrival order, no overtaking
      int need = in.blocks_to_grow(s, life(s) - s.num_computed);
      if (static_cast<int>(d.scheduled.size()) >= max_batch_ || need > free) break;
      free -= need;
      d.scheduled.push_back({s.id, s.pending()});
    }
    return d;
  }

 private:
  int max_batch_;
};

PluginDescriptor describe() {
  PluginDescriptor d;
  d.kind = PluginKind::kScheduling;
  d.name = "example_fcfs";
  d.version = "0.1.0";
  d.summary = "First come first served, whole lives reserved at admission (out-of-tree example)";
  d.params = {{"max_batch", ParamType::kInt, std::int64_t{4}, 1.0, 4096.0, {}, "Most requests running at once"}};
  // A scheduler decides on the host, beside whatever device runs the model.
  d.devices = any_device([](const PluginContext& ctx) {
    return std::make_unique<FcfsScheduler>(static_cast<int>(ctx.params.get_int("max_batch")));
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
