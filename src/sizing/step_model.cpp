#include "sizing/step_model.h"

#include <algorithm>

#include "core/error.h"
#include "model/model_gemms.h"
#include "model/model_info.h"
#include "model/params.h"
#include "optim/muon_plan.h"
#include "optim/shard_layout.h"
#include "train/train_memory.h"

namespace zaya {

OtherWork other_work(const ModelConfig& c, int64_t micro_batch, int64_t seq) {
  OtherWork w;
  w.logits = double(micro_batch) * double(seq) * double(c.vocab_size);
  w.act_bytes = double(activation_bytes(c, micro_batch, seq)) - 4 * w.logits;
  w.scores = double(c.num_attention_stages()) * double(micro_batch) * double(c.num_q_heads) *
             double(seq) * double(seq + 1) / 2;
  return w;
}

double micro_batch_gemm_seconds(const ModelConfig& c, int64_t micro_batch, int64_t seq,
                                const HardwareProfile& p, const ProfileRates& r) {
  double s = 0;
  for (const GemmShape& g : model_gemms(c, int(micro_batch), int(seq)))
    s += gemm_seconds(p, r, g.m, g.n, g.k, g.count, std::min<int64_t>(g.count, c.num_stages));
  return s;
}

StepTime predict_step(const ModelConfig& c, const TrainPlan& plan, const HardwareProfile& p) {
  ZAYA_CHECK(plan.micro_batch > 0 && plan.seq > 0 && plan.world > 0,
             "predict_step: micro-batch, sequence length and world size must be > 0");
  ZAYA_CHECK(plan.global_batch % (plan.micro_batch * plan.world) == 0, "global batch ",
             plan.global_batch, " is not a multiple of micro-batch ", plan.micro_batch, " × ",
             plan.world, " ranks");
  StepTime t;
  const int per_machine = plan.ranks_per_machine > 0 ? plan.ranks_per_machine : plan.world;
  t.threads = p.device == ProfileDevice::kCpu ? std::max(1, p.cores / std::max(1, per_machine)) : 0;
  const ProfileRates& r = p.rates_for(t.threads, p.device == ProfileDevice::kCpu ? per_machine : 1);
  t.micro_batches = plan.global_batch / (plan.micro_batch * plan.world);

  const double mb = double(t.micro_batches);
  t.gemm = mb * micro_batch_gemm_seconds(c, plan.micro_batch, plan.seq, p, r);
  const OtherWork w = other_work(c, plan.micro_batch, plan.seq);
  t.other =
      mb *
      (w.act_bytes * r.ns_per_act_byte + w.scores * r.ns_per_score + w.logits * r.ns_per_logit) *
      1e-9;
  if (!(plan.recompute == RecomputePlan())) {
    const ModelInfo info = compute_model_info(c, plan.seq);
    t.gemm *=
        1.0 + recompute_flops_per_token(c, plan.seq, plan.recompute) / info.train_flops_per_token;
    const double remade =
        double(activation_bytes(c, plan.micro_batch, plan.seq)) -
        double(activation_bytes(c, plan.micro_batch, plan.seq, {}, plan.recompute));
    t.other += mb * remade / 3.0 * r.ns_per_act_byte * 1e-9;
  }

  // Optimizer: Newton–Schulz is spread over the ranks by the Muon plan (balanced to 5 %).
  double ns = 0;
  for (const GemmShape& g : muon_gemms(c, plan.ns_steps))
    ns += gemm_seconds(p, r, g.m, g.n, g.k, g.count, g.count);
  const ParamRegistry registry(c);
  const int64_t P = int64_t(registry.total_floats());
  const ShardLayout layout{P, plan.world, 0};
  const double stream_bytes = 4.0 * (10.0 * double(layout.chunk()) + double(P));
  t.optimizer = ns / plan.world + stream_bytes / (r.membw_gbs * 1e9);

  if (plan.world > 1) {
    ZAYA_CHECK(p.comm.world > 1, "hardware profile '", p.name,
               "' has no measured collectives: run zaya size profile under mpirun -np N (N > 1) "
               "to predict a step on ",
               plan.world, " ranks");
    const double W = plan.world;
    const double buckets = double((layout.chunk() + (1 << 20) - 1) / (1 << 20));
    const double data = 4.0 * double(layout.padded()) * (W - 1) / W;  // bus bytes per collective
    const MuonPlan muon = plan_muon(registry.specs(), layout);
    t.comm = 2 * (data / (p.comm.busbw_gbs * 1e9) + buckets * p.comm.latency_us * 1e-6) +
             double(muon.exchange_bytes) / (p.comm.busbw_gbs * 1e9);
  }
  return t;
}

}  // namespace zaya
