#include "sizing/shape_search.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace zaya {

namespace {

bool on_gpu(const HardwareProfile& p) {
  return p.device == ProfileDevice::kGpu;
}

// Width alignment: GPU GEMMs run in 128-wide tiles (a dimension of 128k + 1 pays for a whole
// extra tile); the CPU backend cuts products into 64-row tiles and OpenBLAS's kernels are 16/32
// wide, so 64 keeps every cut whole.
int64_t alignment(const HardwareProfile& p) {
  return on_gpu(p) ? 128 : 64;
}

int value_bytes(const HardwareProfile& p) {
  return p.dtype == ProfileDtype::kBf16 ? 2 : 4;
}

int64_t default_seq(const HardwareProfile& p) {
  return on_gpu(p) ? 4096 : 256;
}

int64_t padded_vocab(int64_t v) {
  return (v + 63) / 64 * 64;
}

// Per-rank memory limit: the device's memory (a CPU machine's RAM shared by its ranks) less 10 %
// for allocator fragmentation and what the estimate does not list.
double memory_limit(const HardwareProfile& p, const SizeGoal& g) {
  const int per_machine = g.ranks_per_machine > 0 ? g.ranks_per_machine : g.world;
  const double share = on_gpu(p) ? 1.0 : 1.0 / std::max(1, per_machine);
  return 0.9 * double(p.memory_bytes) * share;
}

// ZAYA1's attention: head dim 128 on GPUs; Dq = E/2 (CCA's query compression); 4 query heads per
// key head (2 where the query heads do not split in 4). On the CPU the head dim is 32 below
// hidden 512, else 64.
bool attention_shape(int64_t E, const HardwareProfile& p, int64_t& d, int64_t& nq, int64_t& nk) {
  d = on_gpu(p) ? 128 : (E >= 512 ? 64 : 32);
  if (E % (2 * d) != 0) return false;
  nq = E / 2 / d;
  if (nq < 2 || nq % 2 != 0) return false;
  nk = nq % 4 == 0 ? nq / 4 : nq / 2;  // GQA 4, or 2 where the query heads do not split in 4
  return true;
}

ModelConfig make_config(int64_t E, int64_t F, int64_t L, const SizeGoal& g,
                        const HardwareProfile& p, int64_t d, int64_t nq, int64_t nk) {
  ModelConfig c;
  c.vocab_size = padded_vocab(g.vocab > 0 ? g.vocab : (on_gpu(p) ? 262144 : 4096));
  c.hidden_size = E;
  c.num_stages = L;
  c.num_q_heads = nq;
  c.num_kv_heads = nk;
  c.head_dim = d;
  c.num_experts = g.experts;
  c.expert_hidden = F;
  c.router_dim = std::max<int64_t>(16, E / 8 / 16 * 16);  // ZAYA1-base: 256 for E = 2048
  c.max_seq_len = g.seq > 0 ? g.seq : default_seq(p);
  c.rope_theta = c.max_seq_len > 8192 ? 1e6 : 1e4;
  return c;
}

}  // namespace

std::vector<std::string> sizing_rules(const HardwareProfile& p) {
  const std::string a = std::to_string(alignment(p));
  return {
      "hidden size and expert width are multiples of " + a +
          (on_gpu(p) ? ": GEMMs run in 128 x 128 tiles, so a width of 128k+1 pays for a whole "
                       "extra tile (tile quantization; NVIDIA's GEMM performance guide, and the "
                       "falloff zaya bench gemm --shapes sweep shows)"
                     : ": the CPU backend cuts products into 64-row tiles and OpenBLAS's kernels "
                       "are 16/32 wide; zaya bench gemm --shapes sweep shows the unaligned "
                       "neighbours falling off"),
      std::string("head dim ") +
          (on_gpu(p) ? "128: ZAYA1-base's choice for MI300X; attention kernels reach their best "
                       "rate at 128 (ZAYA1 paper, arXiv 2511.17127)"
                     : "32 below hidden 512, else 64: keeps at least 2 query heads on small "
                       "CPU models"),
      "query width Dq = hidden / 2: CCA compresses queries 2x (ZAYA1-base: 1024 of 2048)",
      "4 query heads per key head (GQA 4; ZAYA1-base: 8 q / 2 kv), 2 where the query heads do "
      "not split in 4",
      "16 experts + the skip route, top-1 (ZAYA1-base); --experts changes the count",
      "expert width in {hidden/2, hidden, 2 hidden}: wider experts give larger, faster GEMMs in "
      "training, but every decoded token reads its expert's weights, so decode latency grows "
      "with the width (ZAYA1-base: expert width = hidden = 2048)",
      "router latent = hidden / 8, at least 16 (ZAYA1-base: 256)",
      "vocabulary padded up to a multiple of 64 (ZAYA1-base: 262,272 = 64 x 4098): the LM head's "
      "GEMM stays aligned",
      "stages even (CCA and MoE alternate); depth chosen to hit the parameter target; width per "
      "layer pair hidden / (stages / 2) within [32, 160] (ZAYA1-base: 2048 / 40 = 51; Kaplan et "
      "al. 2020 find loss flat over a wide range of aspect ratios)",
      "memory per rank at most 90 % of the device's (a CPU machine's RAM is shared by its "
      "ranks); the micro-batch is the largest power of two that fits, at most 64",
      "parameter counts are non-embedding, as ZAYA1's quoted 8.3B total / 760M active",
  };
}

Candidate evaluate_config(const ModelConfig& c, const SizeGoal& goal, const HardwareProfile& p) {
  Candidate k;
  k.config = c;
  const int64_t seq = goal.seq > 0 ? goal.seq : std::min(c.max_seq_len, default_seq(p));
  ZAYA_CHECK(seq <= c.max_seq_len, "--seq ", seq, " exceeds the config's max_seq_len ",
             c.max_seq_len);
  k.seq = seq;
  k.info = compute_model_info(c, seq);
  const double limit = memory_limit(p, goal);
  MemoryOptions options{value_bytes(p), value_bytes(p), value_bytes(p)};
  options.recompute = goal.recompute;
  // A GPU holds the parameters and activations; the host its copies and a checkpoint's snapshot.
  options.device = p.device != ProfileDevice::kCpu;
  for (int64_t mb = 1; mb <= 64; mb *= 2)
    if (double(train_memory(c, mb, seq, goal.world, p.runtime_bytes, options).total()) <= limit)
      k.max_micro_batch = mb;
  k.micro_batch = goal.micro_batch > 0 ? goal.micro_batch : std::max<int64_t>(1, k.max_micro_batch);
  if (goal.micro_batch == 0 && goal.global_batch > 0) {
    // The largest fitting power of two that divides the global batch's share of a rank.
    ZAYA_CHECK(goal.global_batch % goal.world == 0, "--global-batch ", goal.global_batch,
               " is not a multiple of --world ", goal.world);
    while (k.micro_batch > 1 && (goal.global_batch / goal.world) % k.micro_batch != 0)
      k.micro_batch /= 2;
  }
  k.global_batch = goal.global_batch > 0 ? goal.global_batch : k.micro_batch * goal.world;
  k.memory = train_memory(c, k.micro_batch, seq, goal.world, p.runtime_bytes, options);
  if (k.max_micro_batch == 0)
    k.note = "does not fit: " + format_bytes(double(k.memory.total())) + " at micro-batch 1 > " +
             format_bytes(limit) + " per rank";
  else if (k.micro_batch > k.max_micro_batch)
    k.note = "micro-batch " + std::to_string(k.micro_batch) + " does not fit (largest " +
             std::to_string(k.max_micro_batch) + ")";
  TrainPlan plan;
  plan.micro_batch = k.micro_batch;
  plan.seq = seq;
  plan.global_batch = k.global_batch;
  plan.world = goal.world;
  plan.ranks_per_machine = goal.ranks_per_machine;
  plan.recompute = goal.recompute;
  k.step = predict_step(c, plan, p);
  const double tokens = double(k.global_batch) * double(seq);
  k.tokens_per_s = tokens / k.step.total();
  k.tokens_per_day = k.tokens_per_s * 86400;
  if (p.peak_tflops > 0)
    k.mfu = k.info.train_flops_per_token * k.tokens_per_s / goal.world / (p.peak_tflops * 1e12);
  const ProfileRates& r = p.rates_for(k.step.threads);  // decode: one rank alone
  k.decode_ms = 2.0 * double(k.info.active_non_embedding + k.info.embedding_params) /
                (r.membw_gbs * 1e9) * 1e3;
  if (goal.tokens > 0) k.hours_for_tokens = goal.tokens / k.tokens_per_s / 3600;
  return k;
}

std::vector<Candidate> propose_shapes(const SizeGoal& goal_in, const HardwareProfile& p,
                                      int limit) {
  SizeGoal goal = goal_in;
  ZAYA_CHECK(goal.world >= 1, "--world must be >= 1");
  ZAYA_CHECK(goal.experts >= 1, "--experts must be >= 1");
  const bool budget = goal.flops > 0 || goal.gpu_hours > 0;
  ZAYA_CHECK(goal.active_params > 0 || goal.total_params > 0 || budget,
             "zaya size needs a goal: --active-params, --total-params, --flops or --gpu-hours "
             "(or --config to evaluate a shape)");
  ZAYA_CHECK(!budget || goal.tokens > 0, "--flops and --gpu-hours need --tokens");
  if (goal.flops > 0 && goal.active_params <= 0)
    goal.active_params = goal.flops / (6 * goal.tokens);

  const int64_t a = alignment(p);
  auto enumerate = [&](double active_target, double total_target) {
    std::vector<Candidate> out;
    for (int64_t E = 2 * a; E <= 16384; E += (E < 16 * a ? a : 4 * a)) {
      int64_t d, nq, nk;
      if (!attention_shape(E, p, d, nq, nk)) continue;
      for (const int64_t F : {E / 2, E, 2 * E}) {
        if (F % a != 0 || F <= 0) continue;
        // Parameters are affine in the stage count: measure the slope from 2 and 4 stages.
        const ModelInfo i2 = compute_model_info(make_config(E, F, 2, goal, p, d, nq, nk), 1);
        const ModelInfo i4 = compute_model_info(make_config(E, F, 4, goal, p, d, nq, nk), 1);
        const bool by_active = active_target > 0;
        const double v2 = double(by_active ? i2.active_non_embedding : i2.non_embedding_params);
        const double v4 = double(by_active ? i4.active_non_embedding : i4.non_embedding_params);
        const double per_pair = (v4 - v2) / 2, base = v2 - 2 * per_pair;
        const double target = by_active ? active_target : total_target;
        const int64_t L = 2 * std::max<int64_t>(1, std::llround((target - base) / per_pair / 2));
        if (L > 400) continue;
        const double aspect = double(E) / double(L / 2);
        if (aspect < 32 || aspect > 160) continue;
        const ModelConfig c = make_config(E, F, L, goal, p, d, nq, nk);
        const ModelInfo info = compute_model_info(c, 1);
        const double act_err =
            active_target > 0 ? std::abs(double(info.active_non_embedding) / active_target - 1) : 0;
        const double tot_err =
            total_target > 0 ? std::abs(double(info.non_embedding_params) / total_target - 1) : 0;
        if (act_err > 0.15 || tot_err > 0.25) continue;
        Candidate k = evaluate_config(c, goal, p);
        if (k.max_micro_batch == 0) continue;
        out.push_back(std::move(k));
      }
    }
    return out;
  };

  std::vector<Candidate> cands;
  if (goal.gpu_hours > 0 && goal.active_params <= 0) {
    // The largest active size whose best shape trains the tokens within the budget (bisection
    // on log size; the predicted hours grow with the size).
    double lo = 1e5, hi = 1e12;
    for (int it = 0; it < 24; ++it) {
      const double mid = std::sqrt(lo * hi);
      std::vector<Candidate> c = enumerate(mid, goal.total_params);
      const bool fits = std::any_of(c.begin(), c.end(), [&](const Candidate& k) {
        return k.hours_for_tokens * goal.world <= goal.gpu_hours;
      });
      (fits ? lo : hi) = mid;
    }
    goal.active_params = lo;
  }
  cands = enumerate(goal.active_params, goal.total_params);
  if (goal.gpu_hours > 0) {
    std::erase_if(cands, [&](const Candidate& k) {
      return k.hours_for_tokens * goal.world > goal.gpu_hours;
    });
  }
  // Best first: the highest predicted throughput in active-parameter-tokens per second (so a
  // slightly larger model is not penalised for being larger).
  std::sort(cands.begin(), cands.end(), [](const Candidate& x, const Candidate& y) {
    return x.tokens_per_s * double(x.info.active_non_embedding) >
           y.tokens_per_s * double(y.info.active_non_embedding);
  });
  if (int(cands.size()) > limit) cands.resize(size_t(limit));
  return cands;
}

}  // namespace zaya
