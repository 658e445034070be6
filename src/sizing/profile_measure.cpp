#include "sizing/profile_measure.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "bench/gemm_bench.h"
#include "bench/membw_bench.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "model/zaya_model.h"
#include "sizing/step_model.h"

namespace zaya {

namespace {

ModelConfig probe_model(int64_t E, int64_t stages, int64_t nq, int64_t nk, int64_t d, int64_t X,
                        int64_t F, int64_t R, int64_t V, int64_t max_seq) {
  ModelConfig c;
  c.vocab_size = V, c.hidden_size = E, c.num_stages = stages, c.num_q_heads = nq;
  c.num_kv_heads = nk, c.head_dim = d, c.num_experts = X, c.expert_hidden = F, c.router_dim = R;
  c.max_seq_len = max_seq;
  c.validate("probe model");
  return c;
}

// Median seconds of forward + backward of one micro-batch on random tokens.
double time_probe_step(const Probe& p, int steps) {
  ZayaModel m(p.config);
  m.params().init(17);
  std::mt19937 g(3);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(p.config.vocab_size) - 1);
  std::vector<int32_t> tokens(size_t(p.batch) * p.seq);
  for (auto& t : tokens) t = tok(g);
  const std::vector<int32_t> targets = ZayaModel::shifted_targets(tokens, p.batch, p.seq);
  std::vector<double> times;
  for (int i = 0; i <= steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    m.forward(tokens, targets, p.batch, p.seq);
    m.backward();
    if (i > 0) times.push_back(seconds_since(t0));  // the first step grows the arena
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Cross-entropy forward + backward per logit, on 2048 positions × a 4096 vocabulary.
double time_loss_per_logit() {
  constexpr int n = 2048, v = 4096;
  std::mt19937 g(5);
  std::uniform_real_distribution<float> u(-4, 4);
  std::vector<float> logits(size_t{n} * v), work(logits.size()), lse(size_t{n});
  for (float& x : logits) x = u(g);
  std::vector<int32_t> targets(size_t{n});
  for (int i = 0; i < n; ++i) targets[size_t(i)] = int32_t((i * 7919) % v);
  const Backend& be = cpu_backend();
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    work = logits;
    int64_t count = 0;
    const auto t0 = std::chrono::steady_clock::now();
    be.cross_entropy_forward(lse.data(), work.data(), targets.data(), n, v, &count);
    be.cross_entropy_backward_inplace(work.data(), lse.data(), targets.data(), n, v, 1.0f);
    best = std::min(best, seconds_since(t0));
  }
  return best / (double(n) * v);
}

std::vector<int> default_thread_counts() {
  const int cores = std::max(1, int(std::thread::hardware_concurrency()));
  std::vector<int> t;
  for (int n = 1; n < cores; n *= 2) t.push_back(n);
  t.push_back(cores);
  return t;
}

}  // namespace

std::vector<Probe> profile_probes() {
  // Shapes around the CPU configs zaya size proposes, chosen so that the activation bytes and the
  // attention scores vary independently (long and short sequences at equal token counts).
  const ModelConfig a = probe_model(128, 4, 4, 2, 32, 4, 128, 32, 2048, 512);
  return {{a, 8, 128},
          {a, 2, 512},
          {probe_model(256, 2, 4, 2, 64, 8, 256, 64, 4096, 256), 4, 256},
          {probe_model(64, 4, 2, 1, 32, 4, 64, 16, 1024, 64), 16, 64}};
}

void fit_two_rates(const std::vector<double>& x, const std::vector<double>& y,
                   const std::vector<double>& measured, double& a, double& b) {
  ZAYA_CHECK(x.size() == y.size() && x.size() == measured.size() && x.size() >= 2,
             "fit_two_rates: needs at least two equal-length samples");
  // Weighted normal equations of min Σ ((m_i − a x_i − b y_i) / m_i)².
  double sxx = 0, sxy = 0, syy = 0, sxm = 0, sym = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double w = 1.0 / (measured[i] * measured[i]);
    sxx += w * x[i] * x[i], sxy += w * x[i] * y[i], syy += w * y[i] * y[i];
    sxm += w * x[i] * measured[i], sym += w * y[i] * measured[i];
  }
  const double det = sxx * syy - sxy * sxy;
  a = det != 0 ? (sxm * syy - sym * sxy) / det : 0;
  b = det != 0 ? (sym * sxx - sxm * sxy) / det : 0;
  // A negative rate means one term explains the data alone: fit that one.
  if (a < 0 || det == 0) a = 0, b = syy > 0 ? std::max(0.0, sym / syy) : 0;
  if (b < 0) b = 0, a = sxx > 0 ? std::max(0.0, sxm / sxx) : 0;
}

int64_t resident_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // kB
  return -1;
}

HardwareProfile measure_compute_profile(const ProfileOptions& opt, std::FILE* log) {
  const std::vector<int> threads = opt.threads.empty() ? default_thread_counts() : opt.threads;
  for (const int t : threads)
    ZAYA_CHECK(t >= 1 && t <= 4096, "--threads-list: ", t, " is not a thread count in [1, 4096]");
  HardwareProfile p;
  p.device = ProfileDevice::kCpu;
  p.measured = true;
  p.cores = std::max(1, int(std::thread::hardware_concurrency()));
  p.memory_bytes = host_memory_bytes();
  p.dtype = ProfileDtype::kF32;
  const int saved = omp_get_max_threads();
  // The process before any model: start every thread count's OpenMP team and BLAS once.
  for (const int t : threads) {
    omp_set_num_threads(t);
    time_gemm({"warm", 64, 64, 64}, 0.001);
  }
  p.runtime_bytes = std::max<int64_t>(0, resident_bytes());

  for (const int t : threads) p.rates.push_back(measure_rates(t, p, opt, log, nullptr));
  omp_set_num_threads(saved);
  return p;
}

ProfileRates measure_rates(int t, const HardwareProfile& base, const ProfileOptions& opt,
                           std::FILE* log, dist::Communicator* comm) {
  // With other ranks, every phase starts together, so each rank is measured while the others
  // do the same work (sharing the caches and the memory bandwidth as training ranks do).
  auto together = [&] {
    if (comm != nullptr) comm->barrier();
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(t);
  ProfileRates r;
  r.threads = t;
  r.ranks = comm != nullptr ? comm->world_size() : 1;
  std::vector<GemmShape> grid = gemm_grid();
  std::erase_if(grid, [&](const GemmShape& s) {
    return s.m > opt.grid_max || s.n > opt.grid_max || s.k > opt.grid_max;
  });
  ZAYA_CHECK(!grid.empty(), "--grid-max ", opt.grid_max, ": no grid point is that small");
  std::fprintf(log, "== %d thread%s per rank, %d rank%s: GEMM grid (%zu shapes)\n", t,
               t == 1 ? "" : "s", r.ranks, r.ranks == 1 ? "" : "s", grid.size());
  std::fflush(log);
  together();
  for (const GemmShape& s : grid) {
    const GemmTiming g = time_gemm(s, opt.gemm_min_time);
    r.gemm.push_back({s.m, s.n, s.k, g.gflops()});
  }
  together();
  MembwOptions mo;
  mo.times = 5;
  mo.elements = opt.membw_elements;
  mo.threads = {t};
  r.membw_gbs = run_membw_bench(mo, log).at(0).triad;
  together();
  r.ns_per_logit = time_loss_per_logit() * 1e9;
  std::fprintf(log, "cross-entropy forward + backward: %.3f ns per logit\n", r.ns_per_logit);
  HardwareProfile at_t = base;
  at_t.rates = {r};
  std::vector<double> bytes, scores, other;
  std::fprintf(log, "probe steps (forward + backward, median of %d):\n", opt.probe_steps);
  for (const Probe& pr : profile_probes()) {
    together();
    const double step = time_probe_step(pr, opt.probe_steps);
    const double gemm = micro_batch_gemm_seconds(pr.config, pr.batch, pr.seq, at_t, r);
    const OtherWork w = other_work(pr.config, pr.batch, pr.seq);
    const double loss = w.logits * r.ns_per_logit * 1e-9;
    bytes.push_back(w.act_bytes), scores.push_back(w.scores);
    other.push_back(std::max(step - gemm - loss, 0.05 * step));
    std::fprintf(log,
                 "  hidden %4lld, %lld stages, %2d x %4d: step %7.1f ms, products %7.1f ms "
                 "(curve), loss %6.1f ms, rest %7.1f ms\n",
                 (long long)pr.config.hidden_size, (long long)pr.config.num_stages, pr.batch,
                 pr.seq, step * 1e3, gemm * 1e3, loss * 1e3, (step - gemm - loss) * 1e3);
  }
  together();
  double a = 0, b = 0;
  fit_two_rates(bytes, scores, other, a, b);
  r.ns_per_act_byte = a * 1e9, r.ns_per_score = b * 1e9;
  std::fprintf(log, "non-GEMM rates: %.4f ns per activation byte, %.3f ns per attention score\n",
               r.ns_per_act_byte, r.ns_per_score);
  omp_set_num_threads(saved);
  return r;
}

CommRates measure_comm_rates(dist::Communicator& comm, std::FILE* log) {
  const int W = comm.world_size();
  ZAYA_CHECK(W > 1, "measure_comm_rates: needs more than one rank");
  auto time_pair = [&](size_t per_rank, int iters) {
    std::vector<float> full(per_rank * size_t(W), 1.0f), part(per_rank, 0.0f);
    comm.reduce_scatter(full.data(), part.data(), per_rank, DType::F32, dist::ReduceOp::Sum);
    comm.all_gather(part.data(), full.data(), per_rank, DType::F32);
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      comm.reduce_scatter(full.data(), part.data(), per_rank, DType::F32, dist::ReduceOp::Sum);
      comm.all_gather(part.data(), full.data(), per_rank, DType::F32);
    }
    comm.barrier();
    return seconds_since(t0) / (2.0 * iters);  // per collective
  };
  CommRates c;
  c.world = W;
  const double small = time_pair(8, 200);
  const size_t bucket = size_t(1) << 20;
  const double big = time_pair(bucket, 10);
  c.latency_us = small * 1e6;
  // nccl-tests bus bandwidth: (W − 1)/W × the bytes of the whole buffer, over the time.
  const double bus_bytes = 4.0 * double(bucket) * W * (W - 1) / W;
  c.busbw_gbs = bus_bytes / std::max(big - small, 1e-9) * 1e-9;
  if (comm.rank() == 0)
    std::fprintf(log,
                 "collectives on %d ranks: latency %.1f us, reduce-scatter/all-gather busbw %.2f "
                 "GB/s (4 MiB per rank)\n",
                 W, c.latency_us, c.busbw_gbs);
  return c;
}

}  // namespace zaya
