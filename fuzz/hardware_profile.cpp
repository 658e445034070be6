// A hardware profile for zaya size (`zaya size profile --out` writes one; users pass files from
// other machines): read_profile, then what zaya size does with it: the rates for several thread
// and rank counts, GEMM prices on the curve (in and outside the grid) and a predicted step of the
// tiny model at 1 and 2 ranks.
#include <cmath>

#include "fuzz_util.h"
#include "model/config.h"
#include "sizing/hardware_profile.h"
#include "sizing/step_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::write_input("profile.json", data, size);
  zaya::HardwareProfile p;
  bool ok = false;
  ZAYA_FUZZ_EXPECT_ERRORS({
    p = zaya::read_profile(path);
    ok = true;
  });
  if (!ok) return 0;
  for (const int threads : {0, 1, 2, 64})
    for (const int ranks : {1, 2}) {
      const zaya::ProfileRates& r = p.rates_for(threads, ranks);
      for (const int64_t m : {1, 16, 100, 4096, 100000})
        ZAYA_FUZZ_EXPECT_ERRORS(zaya::gemm_seconds(p, r, m, 64, 33, 3, 2));
    }
  zaya::ModelConfig c;
  c.vocab_size = 97, c.hidden_size = 64, c.num_stages = 4, c.num_q_heads = 4, c.num_kv_heads = 2;
  c.head_dim = 8, c.num_experts = 4, c.expert_hidden = 16, c.router_dim = 16, c.max_seq_len = 64;
  for (const int world : {1, 2}) {
    zaya::TrainPlan plan;
    plan.micro_batch = 2, plan.seq = 64, plan.global_batch = 8, plan.world = world;
    ZAYA_FUZZ_EXPECT_ERRORS(zaya::predict_step(c, plan, p));
  }
  return 0;
}
