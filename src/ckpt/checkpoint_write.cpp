// Writing a checkpoint: rank files, manifest, COMPLETE marker, atomic rename; retention.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/ckpt_fs.h"
#include "core/error.h"
#include "data/checksum.h"
#include "io/safetensors.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"
#include "optim/shard_layout.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The flat-layout state kinds and the snapshot buffer each one comes from.
struct FlatKind {
  const char* kind;    // manifest "kind"
  const char* prefix;  // prepended to the model's tensor name ("" for weights)
  const Tensor CheckpointSnapshot::*buffer;
};
constexpr FlatKind kFlatKinds[] = {{"weight", "", &CheckpointSnapshot::weights},
                                   {"exp_avg", "exp_avg/", &CheckpointSnapshot::exp_avg},
                                   {"exp_avg_sq", "exp_avg_sq/", &CheckpointSnapshot::exp_avg_sq}};

// One piece of a tensor inside a rank's range [lo, hi): elements [begin, end) of the tensor,
// stored under `key`. A whole tensor keeps its shape and plain name, so a world-1 shard reads
// like a model file; a cut one is a 1-D chunk named by its first element.
struct Chunk {
  const ParamSpec* spec;
  std::string name, key;
  int64_t begin, end;
  bool whole;
};
std::vector<Chunk> chunks_in_range(const FlatKind& fk, const std::vector<ParamSpec>& specs,
                                   int64_t lo, int64_t hi) {
  std::vector<Chunk> out;
  for (const ParamSpec& s : specs) {
    const int64_t b = std::max<int64_t>(lo, int64_t(s.offset));
    const int64_t e = std::min<int64_t>(hi, int64_t(s.offset) + s.numel);
    if (b >= e) continue;
    const std::string name = fk.prefix + s.name;
    const bool whole = e - b == s.numel;
    const int64_t first = b - int64_t(s.offset);
    out.push_back({&s, name, whole ? name : name + "@" + std::to_string(first), first,
                   e - int64_t(s.offset), whole});
  }
  return out;
}

}  // namespace

CheckpointSnapshot take_snapshot(const ParamStore& params, const Optimizer& optimizer,
                                 const RouterBalancer& balancer, TrainerState state) {
  CheckpointSnapshot s;
  state.optimizer_steps = optimizer.step_count();
  state.balancer_steps = balancer.step_count();
  s.state = std::move(state);
  s.specs = params.registry().specs();
  const ShardLayout& shard = optimizer.shard();
  s.total = int64_t(params.size());
  ZAYA_CHECK(shard.total == s.total, "take_snapshot: the optimizer covers ", shard.total,
             " floats, the model ", s.total);
  s.rank = shard.rank;
  s.world_size = shard.world;
  s.begin = shard.begin();
  s.end = shard.end();
  s.weights = Tensor({s.end - s.begin}, DType::F32);
  std::memcpy(s.weights.raw(), params.weights() + s.begin, size_t(s.end - s.begin) * sizeof(float));
  // On host memory views of the live state, to copy; off it copies made for this snapshot
  // (the host keeps the optimizer state no longer than the snapshot does).
  const auto opt = optimizer.state_tensors();
  const bool live = optimizer.backend().host_memory();
  s.exp_avg = live ? opt.at("exp_avg").clone() : opt.at("exp_avg");
  s.exp_avg_sq = live ? opt.at("exp_avg_sq").clone() : opt.at("exp_avg_sq");
  for (const auto& [name, t] : balancer.state_tensors()) s.balancer[name] = t.clone();
  return s;
}

std::string checkpoint_rank_file(int rank) {
  char b[40];
  std::snprintf(b, sizeof b, "rank-%05d.safetensors", rank);
  return b;
}

std::string checkpoint_dir_name(const std::string& root, int64_t step) {
  char b[32];
  std::snprintf(b, sizeof b, "step-%08lld", (long long)step);
  return (fs::path(root) / b).string();
}

std::optional<int64_t> committed_checkpoint_step(const std::string& dir_name) {
  if (dir_name.size() != 13 || dir_name.rfind("step-", 0) != 0) return std::nullopt;
  if (!std::all_of(dir_name.begin() + 5, dir_name.end(), ::isdigit)) return std::nullopt;
  return std::stoll(dir_name.substr(5));
}

std::string prepare_checkpoint_dir(const std::string& root, int64_t step) {
  const std::string tmp = checkpoint_dir_name(root, step) + ".tmp";
  fs::remove_all(tmp);  // left over by a crash during an earlier save of this step
  fs::create_directories(tmp);
  return tmp;
}

json write_rank_file(const std::string& tmp_dir, const CheckpointSnapshot& snap) {
  ZAYA_CHECK(snap.weights.numel() == snap.end - snap.begin, "write_rank_file: the snapshot holds ",
             snap.weights.numel(), " floats for the range [", snap.begin, ", ", snap.end, ")");
  const std::string file = checkpoint_rank_file(snap.rank);
  std::vector<std::pair<std::string, Tensor>> out;
  for (const FlatKind& fk : kFlatKinds) {
    const Tensor& flat = snap.*(fk.buffer);
    for (const Chunk& c : chunks_in_range(fk, snap.specs, snap.begin, snap.end)) {
      const int64_t at = int64_t(c.spec->offset) + c.begin - snap.begin;
      const Tensor piece = flat.slice(at, at + (c.end - c.begin));
      out.emplace_back(c.key, c.whole ? piece.reshape(c.spec->shape) : piece);
    }
  }
  if (snap.rank == 0)  // small and not in the flat layout: rank 0 holds the balancer state
    for (const auto& [n, t] : snap.balancer) out.emplace_back("balancer/" + n, t);
  const std::string path = (fs::path(tmp_dir) / file).string();
  write_safetensors(path, out, {{"format", "zaya-ckpt"}, {"rank", std::to_string(snap.rank)}});
  ckpt_fs::sync_path(path);
  uint64_t bytes = 0;
  const uint64_t sum = ckpt_fs::file_checksum(path, &bytes);
  return {{"name", file}, {"rank", snap.rank}, {"bytes", bytes}, {"fnv1a64", checksum_hex(sum)}};
}

std::string commit_checkpoint(const std::string& root, const CheckpointSnapshot& snap,
                              const json& files) {
  const int world_size = snap.world_size;
  ZAYA_CHECK(int(files.size()) == world_size, "commit_checkpoint: ", files.size(),
             " rank files for world size ", world_size);
  const std::string final_dir = checkpoint_dir_name(root, snap.state.step);
  const std::string tmp = final_dir + ".tmp";
  const ShardLayout layout{snap.total, world_size, 0};

  // Manifest entries, keyed by tensor name, collecting chunks from every rank in rank order.
  json tensors = json::array(), partition = json::array();
  std::map<std::string, size_t> entry_of;
  auto entry = [&](const std::string& name, const char* kind, const Shape& shape,
                   int64_t flat_offset) -> json& {
    auto it = entry_of.find(name);
    if (it == entry_of.end()) {
      it = entry_of.emplace(name, tensors.size()).first;
      tensors.push_back({{"name", name},
                         {"kind", kind},
                         {"dtype", "F32"},
                         {"shape", json(shape)},
                         {"flat_offset", flat_offset},
                         {"chunks", json::array()}});
    }
    return tensors[it->second];
  };
  for (int rank = 0; rank < world_size; ++rank) {
    const int64_t lo = layout.begin_of(rank), hi = layout.end_of(rank);
    partition.push_back({lo, hi});
    const std::string file = checkpoint_rank_file(rank);
    for (const FlatKind& fk : kFlatKinds)
      for (const Chunk& c : chunks_in_range(fk, snap.specs, lo, hi)) {
        entry(c.name, fk.kind, c.spec->shape, int64_t(c.spec->offset))["chunks"].push_back(
            {{"file", file}, {"key", c.key}, {"begin", c.begin}, {"end", c.end}});
      }
    if (rank == 0)
      for (const auto& [n, t] : snap.balancer) {
        const std::string name = "balancer/" + n;
        entry(name, "balancer", t.shape(), -1)["chunks"].push_back(
            {{"file", file}, {"key", name}, {"begin", 0}, {"end", t.numel()}});
      }
  }

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
        {"total_floats", snap.total},
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

std::string write_checkpoint(const std::string& root, const CheckpointSnapshot& snap,
                             int world_size) {
  ZAYA_CHECK(world_size >= 1, "write_checkpoint: world size must be >= 1, got ", world_size);
  ZAYA_CHECK(snap.begin == 0 && snap.end == snap.total,
             "write_checkpoint: needs a snapshot of the "
             "whole buffer, got the range [",
             snap.begin, ", ", snap.end, ") of ", snap.total);
  const std::string tmp = prepare_checkpoint_dir(root, snap.state.step);
  const ShardLayout layout{snap.total, world_size, 0};
  json files = json::array();
  CheckpointSnapshot part;
  part.state = snap.state;
  part.specs = snap.specs;
  part.total = snap.total;
  part.world_size = world_size;
  part.balancer = snap.balancer;
  for (int rank = 0; rank < world_size; ++rank) {
    part.rank = rank;
    part.begin = layout.begin_of(rank);
    part.end = layout.end_of(rank);
    part.weights = snap.weights.slice(part.begin, part.end);
    part.exp_avg = snap.exp_avg.slice(part.begin, part.end);
    part.exp_avg_sq = snap.exp_avg_sq.slice(part.begin, part.end);
    files.push_back(write_rank_file(tmp, part));
  }
  part.world_size = world_size;
  return commit_checkpoint(root, part, files);
}

std::string set_aside_damaged_checkpoint(const std::string& dir) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
  std::string aside = dir + ".damaged-" + stamp;
  // Two resumes within a second (or a clock set back) must not meet: a suffix keeps both.
  for (int i = 2; fs::exists(aside); ++i)
    aside = dir + ".damaged-" + stamp + "-" + std::to_string(i);
  std::error_code ec;
  fs::rename(dir, aside, ec);
  ZAYA_CHECK(!ec, "cannot move the damaged checkpoint '", dir, "' aside to '", aside,
             "': ", ec.message(), "; nothing was deleted. Move it away by hand and resume again");
  return aside;
}

std::vector<std::string> apply_retention(const std::string& root, int keep_last, int64_t keep_every,
                                         int64_t saved_step) {
  std::vector<std::pair<int64_t, std::string>> done;
  for (const auto& d : fs::directory_iterator(root)) {
    const auto step = committed_checkpoint_step(d.path().filename().string());
    if (!d.is_directory() || !step) continue;
    if (!fs::exists(d.path() / "COMPLETE")) continue;  // not ours to judge: leave it
    if (*step > saved_step) continue;                  // not this timeline's: leave it
    done.emplace_back(*step, d.path().string());
  }
  std::sort(done.begin(), done.end());
  std::vector<std::string> removed;
  for (size_t i = 0; i < done.size(); ++i) {
    const bool recent = i + size_t(std::max(keep_last, 1)) >= done.size();
    const bool milestone = keep_every > 0 && done[i].first % keep_every == 0;
    if (recent || milestone) continue;
    fs::remove_all(done[i].second);
    removed.push_back(done[i].second);
  }
  return removed;
}

}  // namespace zaya
