// zaya ckpt inspect DIR: what a checkpoint holds and whether it is complete and intact. DIR is one
// checkpoint (step-N/) or a directory of them (a run's ckpt/), which lists each with its status.
// zaya ckpt export-hf / import-hf: to and from a Hugging Face model directory (ZAYA1 layout).
#include "cmd_ckpt.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_interop.h"
#include "core/error.h"
#include "io/output_path.h"

namespace zaya::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Prints one checkpoint; returns false when it does not verify.
bool inspect_one(const std::string& dir) {
  json m;
  try {
    m = verify_checkpoint(dir);
  } catch (const Error& e) {
    std::printf("%s: INVALID\n  %s\n", dir.c_str(), e.what());
    return false;
  }
  const json& tr = m["trainer"];
  std::printf("%s: complete, checksums verified\n", dir.c_str());
  std::printf("  step %lld, world size %d, tokens %lld, sample index %lld, seed %llu\n",
              (long long)m["step"].get<int64_t>(), m["world_size"].get<int>(),
              (long long)tr["tokens_done"].get<int64_t>(),
              (long long)tr["sample_index"].get<int64_t>(),
              (unsigned long long)m["rng"]["seed"].get<uint64_t>());
  std::printf("  optimizer steps %lld, balancer steps %lld, flat state %lld floats\n",
              (long long)tr["optimizer_steps"].get<int64_t>(),
              (long long)tr["balancer_steps"].get<int64_t>(),
              (long long)m["optimizer"]["total_floats"].get<int64_t>());
  std::map<std::string, std::pair<int64_t, int64_t>> kinds;  // tensors, elements
  for (const json& t : m["tensors"]) {
    auto& k = kinds[t["kind"].get<std::string>()];
    ++k.first;
    k.second += shape_numel(t["shape"].get<Shape>());
  }
  for (const auto& [kind, k] : kinds)
    std::printf("  %-10s %5lld tensors %12lld elements\n", kind.c_str(), (long long)k.first,
                (long long)k.second);
  uint64_t total = 0;
  for (const json& f : m["files"]) {
    total += f["bytes"].get<uint64_t>();
    std::printf("  %s  %llu bytes  fnv1a64 %s  ok\n", f["name"].get<std::string>().c_str(),
                (unsigned long long)f["bytes"].get<uint64_t>(),
                f["fnv1a64"].get<std::string>().c_str());
  }
  std::printf("  total %llu bytes\n", (unsigned long long)total);
  return true;
}

struct HfArgs {
  std::string from, to, dtype = "fp32", max_shard_size = "5GB";
  bool force = false;
};

// export-hf's source: a checkpoint, or a run's ckpt/ root, whose newest complete checkpoint is
// taken (and named).
std::string export_source(const std::string& dir) {
  if (fs::exists(fs::path(dir) / "manifest.json")) return dir;
  const std::string latest = find_latest_checkpoint(
      dir, [](const std::string& why) { std::fprintf(stderr, "%s\n", why.c_str()); });
  ZAYA_CHECK(!latest.empty(), "ckpt export-hf: '", dir,
             "' is neither a checkpoint (no manifest.json) nor a checkpoint root holding a "
             "complete step-N checkpoint");
  std::fprintf(stderr,
               "ckpt export-hf: '%s' is a checkpoint root; exporting its newest complete "
               "checkpoint, %s\n",
               dir.c_str(), latest.c_str());
  return latest;
}

int export_hf(const HfArgs& a) {
  HfWriteOptions opt;
  ZAYA_CHECK(a.dtype == "fp32" || a.dtype == "bf16", "--dtype: '", a.dtype,
             "' is not one of fp32, bf16");
  opt.dtype = a.dtype == "fp32" ? DType::F32 : DType::BF16;
  opt.max_shard_bytes = parse_hf_size(a.max_shard_size, "--max-shard-size");
  // Checked before any weight is read. The source a root resolves to is an input too; a run
  // directory's own model/ is an existing directory like any other.
  const std::string from = export_source(a.from);
  StagedOutput out({"OUT_DIR", a.to, OutputKind::kDirectory, a.force, {a.from, from}});
  export_checkpoint_to_hf(from, out.path(), opt);
  out.commit();
  const bool sharded = fs::exists(fs::path(a.to) / "model.safetensors.index.json");
  std::printf("exported %s to %s (%s, %s)\n", from.c_str(), a.to.c_str(), a.dtype.c_str(),
              sharded ? "sharded, model.safetensors.index.json" : "model.safetensors");
  return 0;
}

int import_hf(const HfArgs& a) {
  std::vector<std::string> warnings;
  // The checkpoint is written into a temporary root beside its final place, then moved there.
  const std::string target = checkpoint_dir_name(a.to, 0);
  StagedOutput out({"OUT_ROOT", target, OutputKind::kDirectory, a.force, {a.from}});
  out.commit(import_hf_to_checkpoint(a.from, out.path(), &warnings));
  const std::string dir = target;
  for (const std::string& w : warnings) std::fprintf(stderr, "zaya: warning: %s\n", w.c_str());
  std::printf("imported %s as checkpoint %s (step 0, fresh optimizer state)\n", a.from.c_str(),
              dir.c_str());
  return 0;
}

}  // namespace

Runner add_ckpt_commands(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto* ckpt = app.add_subcommand("ckpt", "Checkpoints");
  ckpt->require_subcommand(1);
  auto* inspect = ckpt->add_subcommand(
      "inspect", "Show a checkpoint (or every checkpoint in a directory) and verify it");
  inspect->add_option("dir", *dir, "step-N checkpoint directory, or a run's ckpt/ directory")
      ->required()
      ->check(ExistingDir());

  auto hf = std::make_shared<HfArgs>();
  auto* exp = ckpt->add_subcommand(
      "export-hf",
      "Write a checkpoint's weights (any world size) as a Hugging Face ZAYA1 model "
      "directory: config.json + model.safetensors, or shards + index");
  exp->add_option("ckpt_dir", hf->from,
                  "step-N checkpoint directory, or a run's ckpt/ root (its newest complete one)")
      ->required()
      ->check(ExistingDir());
  exp->add_option("out_dir", hf->to, "output model directory")->required()->check(OutputDir());
  exp->add_option("--dtype", hf->dtype,
                  "fp32 (bitwise round trip) or bf16 (half the size, rounded: lossy; the "
                  "routers' balancing_biases stay fp32)")
      ->capture_default_str();
  exp->add_option("--max-shard-size", hf->max_shard_size,
                  "shard the weights above this size, e.g. 5GB, 200MB, 64MiB")
      ->capture_default_str();
  exp->add_flag("--force", hf->force, "replace an existing, non-empty OUT_DIR");
  auto* imp = ckpt->add_subcommand(
      "import-hf",
      "Turn a Hugging Face ZAYA1 model directory into a zaya checkpoint (step 0, "
      "zero optimizer state) under OUT_ROOT/step-00000000");
  imp->add_option("hf_dir", hf->from, "Hugging Face model directory")
      ->required()
      ->check(ExistingDir());
  imp->add_option("out_root", hf->to, "checkpoint root directory")->required()->check(OutputDir());
  imp->add_flag("--force", hf->force, "replace an existing OUT_ROOT/step-00000000");

  return [=]() -> int {
    if (*exp) return export_hf(*hf);
    if (*imp) return import_hf(*hf);
    if (!*inspect) return kNotMine;
    ZAYA_CHECK(fs::is_directory(*dir), "ckpt inspect: '", *dir, "' is not a directory");
    if (fs::exists(fs::path(*dir) / "manifest.json") || fs::exists(fs::path(*dir) / "COMPLETE") ||
        fs::path(*dir).filename().string().rfind("step-", 0) == 0)
      return inspect_one(*dir) ? 0 : 1;
    std::map<std::string, bool> dirs;
    for (const auto& d : fs::directory_iterator(*dir))
      if (d.is_directory() && d.path().filename().string().rfind("step-", 0) == 0)
        dirs[d.path().string()] = true;
    ZAYA_CHECK(!dirs.empty(), "ckpt inspect: no step-N checkpoint directories in '", *dir, "'");
    bool all_ok = true;
    for (const auto& [d, unused] : dirs) all_ok = inspect_one(d) && all_ok;
    return all_ok ? 0 : 1;
  };
}

}  // namespace zaya::cli
