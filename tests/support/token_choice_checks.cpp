#include "token_choice_checks.h"

namespace inferlab::testing {

std::vector<Request> token_choice_requests(int vocab, int n, int max_output) {
  std::vector<Request> reqs;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = 20 + i;
    for (int t = 0; t < 3 + i; ++t) r.prompt.push_back(1 + (37 * t + 11 * i) % (vocab - 1));
    r.max_output = max_output;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

ChoicePaths run_both_choice_paths(Model& model, Attention& attention, Decoder& decoder,
                                  const std::function<std::shared_ptr<Scheduler>()>& make_scheduler,
                                  const std::vector<Request>& requests, std::uint64_t seed) {
  EngineOptions eo;
  eo.kv.block_size = 16;
  eo.seed = seed;
  ChoicePaths out;
  {
    std::shared_ptr<Scheduler> sched = make_scheduler();
    out.device = Engine(model, attention, *sched, decoder, eo).run(requests);
  }
  HostChoiceDecoder host(decoder);
  std::shared_ptr<Scheduler> sched = make_scheduler();
  out.host = Engine(model, attention, *sched, host, eo).run(requests);
  return out;
}

}  // namespace inferlab::testing
