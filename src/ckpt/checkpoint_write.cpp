// Writing a checkpoint: rank files, manifest, COMPLETE marker, atomic rename; retention.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/ckpt_fs.h"
#include "ckpt/write_hook.h"
#include "core/error.h"
#include "data/checksum.h"
#include "io/safetensors.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string rank_file(int rank) {
  char b[40];
  std::snprintf(b, sizeof b, "rank-%05d.safetensors", rank);
  return b;
}

// The flat-layout state kinds and the snapshot buffer each one comes from.
struct FlatKind {
  const char* kind;    // manifest "kind"
  const char* prefix;  // prepended to the model's tensor name ("" for weights)
  const Tensor CheckpointSnapshot::*buffer;
};
constexpr FlatKind kFlatKinds[] = {{"weight", "", &CheckpointSnapshot::weights},
                                   {"exp_avg", "exp_avg/", &CheckpointSnapshot::exp_avg},
                                   {"exp_avg_sq", "exp_avg_sq/", &CheckpointSnapshot::exp_avg_sq}};

json shape_json(const Shape& s) {
  return json(s);
}

}  // namespace

CheckpointSnapshot take_snapshot(const ParamStore& params, const Optimizer& optimizer,
                                 const RouterBalancer& balancer, TrainerState state) {
  CheckpointSnapshot s;
  state.optimizer_steps = optimizer.step_count();
  state.balancer_steps = balancer.step_count();
  s.state = std::move(state);
  s.specs = params.registry().specs();
  const int64_t total = int64_t(params.size());
  s.weights = Tensor({total}, DType::F32);
  std::memcpy(s.weights.raw(), params.weights(), size_t(total) * sizeof(float));
  const auto opt = optimizer.state_tensors();
  s.exp_avg = opt.at("exp_avg").clone();
  s.exp_avg_sq = opt.at("exp_avg_sq").clone();
  for (const auto& [name, t] : balancer.state_tensors()) s.balancer[name] = t.clone();
  return s;
}

std::string checkpoint_dir_name(const std::string& root, int64_t step) {
  char b[32];
  std::snprintf(b, sizeof b, "step-%08lld", (long long)step);
  return (fs::path(root) / b).string();
}

std::string write_checkpoint(const std::string& root, const CheckpointSnapshot& snap,
                             int world_size) {
  ZAYA_CHECK(world_size >= 1, "write_checkpoint: world size must be >= 1, got ", world_size);
  const std::string final_dir = checkpoint_dir_name(root, snap.state.step);
  const std::string tmp = final_dir + ".tmp";
  fs::remove_all(tmp);  // left over by a crash during an earlier save of this step
  fs::create_directories(tmp);
  const int64_t total = snap.weights.numel();

  json tensors = json::array(), files = json::array(), partition = json::array();
  // Manifest entries, keyed by tensor name, collecting chunks from every rank.
  std::map<std::string, size_t> entry_of;
  auto entry = [&](const std::string& name, const char* kind, const Shape& shape,
                   int64_t flat_offset) -> json& {
    auto it = entry_of.find(name);
    if (it == entry_of.end()) {
      it = entry_of.emplace(name, tensors.size()).first;
      tensors.push_back({{"name", name},
                         {"kind", kind},
                         {"dtype", "F32"},
                         {"shape", shape_json(shape)},
                         {"flat_offset", flat_offset},
                         {"chunks", json::array()}});
    }
    return tensors[it->second];
  };

  for (int rank = 0; rank < world_size; ++rank) {
    const int64_t lo = total * rank / world_size, hi = total * (rank + 1) / world_size;
    partition.push_back({lo, hi});
    const std::string file = rank_file(rank);
    std::vector<std::pair<std::string, Tensor>> out;
    for (const FlatKind& fk : kFlatKinds) {
      const Tensor& flat = snap.*(fk.buffer);
      for (const ParamSpec& s : snap.specs) {
        const int64_t b = std::max<int64_t>(lo, int64_t(s.offset));
        const int64_t e = std::min<int64_t>(hi, int64_t(s.offset) + s.numel);
        if (b >= e) continue;
        const std::string name = fk.prefix + s.name;
        const bool whole = e - b == s.numel;
        // A whole tensor keeps its shape and plain name, so a world-1 shard reads like a model
        // file; a cut one is a 1-D chunk named by its first element.
        const std::string key = whole ? name : name + "@" + std::to_string(b - int64_t(s.offset));
        out.emplace_back(key, whole ? flat.slice(b, e).reshape(s.shape) : flat.slice(b, e));
        entry(name, fk.kind, s.shape, int64_t(s.offset))["chunks"].push_back(
            {{"file", file},
             {"key", key},
             {"begin", b - int64_t(s.offset)},
             {"end", e - int64_t(s.offset)}});
      }
    }
    if (rank == 0)  // small and not in the flat layout: rank 0 holds the balancer state
      for (const auto& [n, t] : snap.balancer) {
        const std::string name = "balancer/" + n;
        out.emplace_back(name, t);
        entry(name, "balancer", t.shape(), -1)["chunks"].push_back(
            {{"file", file}, {"key", name}, {"begin", 0}, {"end", t.numel()}});
      }
    const std::string path = (fs::path(tmp) / file).string();
    write_safetensors(path, out, {{"format", "zaya-ckpt"}, {"rank", std::to_string(rank)}});
    ckpt_fs::sync_path(path);
    uint64_t bytes = 0;
    const uint64_t sum = ckpt_fs::file_checksum(path, &bytes);
    files.push_back(
        {{"name", file}, {"rank", rank}, {"bytes", bytes}, {"fnv1a64", checksum_hex(sum)}});
  }

  run_checkpoint_write_hook(snap.state.step);  // Aegis drill: die before the manifest and rename

  const TrainerState& st = snap.state;
  const json manifest = {
      {"format", "zaya-sharded-checkpoint"},
      {"version", 1},
      {"step", st.step},
      {"world_size", world_size},
      {"trainer",
       {{"step", st.step},
        {"tokens_done", st.tokens_done},
        {"sample_index", st.sample_index},
        {"optimizer_steps", st.optimizer_steps},
        {"balancer_steps", st.balancer_steps}}},
      {"rng",
       {{"seed", st.seed},
        {"note", "data order and init are pure functions of (seed, sample_index); no other RNG"}}},
      {"optimizer",
       {{"layout", "flat"},
        {"total_floats", total},
        {"state", {"exp_avg", "exp_avg_sq"}},
        {"partition", partition}}},
      {"files", files},
      {"tensors", tensors},
      {"config", st.config}};
  const std::string text = manifest.dump(1) + "\n";
  ckpt_fs::write_synced((fs::path(tmp) / "manifest.json").string(), text);
  ckpt_fs::write_synced(
      (fs::path(tmp) / "COMPLETE").string(),
      "manifest.json fnv1a64 " + checksum_hex(fnv1a64(text.data(), text.size())) + "\n");
  ckpt_fs::sync_path(tmp);
  // A resumed run may save a step that an abandoned (possibly damaged) checkpoint already holds:
  // move the old one aside first so the rename below always succeeds.
  if (fs::exists(final_dir)) {
    const std::string old = final_dir + ".old";
    fs::remove_all(old);
    fs::rename(final_dir, old);
    fs::rename(tmp, final_dir);
    fs::remove_all(old);
  } else {
    fs::rename(tmp, final_dir);
  }
  ckpt_fs::sync_path(root);
  return final_dir;
}

std::vector<std::string> apply_retention(const std::string& root, int keep_last,
                                         int64_t keep_every) {
  std::vector<std::pair<int64_t, std::string>> done;
  for (const auto& d : fs::directory_iterator(root)) {
    const std::string n = d.path().filename().string();
    if (!d.is_directory() || n.size() != 13 || n.rfind("step-", 0) != 0) continue;
    if (!fs::exists(d.path() / "COMPLETE")) continue;  // not ours to judge: leave it
    done.emplace_back(std::stoll(n.substr(5)), d.path().string());
  }
  std::sort(done.begin(), done.end());
  std::vector<std::string> removed;
  for (size_t i = 0; i < done.size(); ++i) {
    const bool recent = i + size_t(std::max(keep_last, 0)) >= done.size();
    const bool milestone = keep_every > 0 && done[i].first % keep_every == 0;
    if (recent || milestone) continue;
    fs::remove_all(done[i].second);
    removed.push_back(done[i].second);
  }
  return removed;
}

}  // namespace zaya
