#include "bench/ckpt_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/async_saver.h"
#include "ckpt/checkpoint.h"
#include "core/clock.h"
#include "core/error.h"
#include "model/config.h"
#include "model/params.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

// Every rank writes its own file; rank 0 gathers the file entries and commits.
double parallel_save(dist::Communicator& comm, const CheckpointSnapshot& snap,
                     const std::string& root) {
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  if (comm.rank() == 0) prepare_checkpoint_dir(root, snap.state.step);
  comm.barrier();
  const std::string tmp = checkpoint_dir_name(root, snap.state.step) + ".tmp";
  gather_and_commit(&comm, root, snap, write_rank_file(tmp, snap), "");
  comm.barrier();
  return seconds_since(t0);
}

// Rank 0 receives every rank's range of the three flat buffers and writes every file itself.
double single_writer_save(dist::Communicator& comm, const CheckpointSnapshot& snap,
                          const std::string& root) {
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int kTag = 7201;
  Tensor CheckpointSnapshot::*const buffers[] = {
      &CheckpointSnapshot::weights, &CheckpointSnapshot::exp_avg, &CheckpointSnapshot::exp_avg_sq};
  if (comm.rank() != 0) {
    for (auto b : buffers)
      comm.send((snap.*b).raw(), size_t((snap.*b).numel()), DType::F32, 0, kTag);
  } else {
    CheckpointSnapshot whole = snap;
    whole.begin = 0;
    whole.end = snap.total;
    const ShardLayout layout{snap.total, comm.world_size(), 0};
    for (auto b : buffers) {
      Tensor full({snap.total}, DType::F32);
      std::copy_n((snap.*b).data<float>(), (snap.*b).numel(), full.data<float>());
      whole.*b = full;
    }
    for (int r = 1; r < comm.world_size(); ++r)
      for (auto b : buffers)
        comm.recv((whole.*b).data<float>() + layout.begin_of(r),
                  size_t(layout.end_of(r) - layout.begin_of(r)), DType::F32, r, kTag);
    write_checkpoint(root, whole, comm.world_size());
  }
  comm.barrier();
  return seconds_since(t0);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void run_ckpt_bench(dist::Communicator& comm, const CkptBenchOptions& opt, std::FILE* out) {
  ZAYA_CHECK(opt.repeats >= 1, "--repeats must be >= 1, got ", opt.repeats);
  const nlohmann::json root = read_config_file(opt.config_path);
  ZAYA_CHECK(root.contains("model"), opt.config_path, ": missing required section 'model'");
  const ModelConfig mc = model_config_from_json(root["model"], opt.config_path);
  ParamStore params(mc);
  params.init(1);
  const OptimConfig oc;
  Optimizer optimizer(params.registry(), oc, &comm);
  RouterBalancer balancer(params.registry(), oc);
  TrainerState st;
  st.step = 1;
  st.config = root;
  const CheckpointSnapshot snap = take_snapshot(params, optimizer, balancer, st);
  const double gib = double(snap.total) * 3 * 4 / double(1 << 30);
  const std::string par_root = (fs::path(opt.dir) / "parallel").string();
  const std::string one_root = (fs::path(opt.dir) / "single").string();
  std::vector<double> par, one;
  for (int i = 0; i < opt.repeats; ++i) {
    par.push_back(parallel_save(comm, snap, par_root));
    one.push_back(single_writer_save(comm, snap, one_root));
  }
  if (comm.rank() == 0) {
    const double p = median(par), s = median(one);
    std::fprintf(out,
                 "bench ckpt: %s, %lld parameters, %.3f GiB of weights + optimizer state, %d "
                 "rank%s, median of %d saves (write, fsync, manifest, rename)\n",
                 opt.config_path.c_str(), (long long)snap.total, gib, comm.world_size(),
                 comm.world_size() == 1 ? "" : "s", opt.repeats);
    std::fprintf(out, "  parallel (every rank writes its file): %8.3f s  %6.2f GiB/s\n", p,
                 gib / p);
    std::fprintf(out, "  single writer (rank 0 gathers):        %8.3f s  %6.2f GiB/s\n", s,
                 gib / s);
    std::fprintf(out, "  parallel / single-writer speed-up:     %8.2fx\n", s / p);
    fs::remove_all(opt.dir);
  }
  comm.barrier();
}

}  // namespace zaya
