// zaya size: ZAYA1 shapes and training plans from a hardware profile; zaya size profile: measure
// this machine's profile. The rules are in src/sizing/shape_search.cpp (sizing_rules) and
// docs/sizing.md.
#include "cmd_size.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "io/output_path.h"
#include "model/config.h"
#include "model/model_info.h"
#include "model/recompute.h"
#include "sizing/hardware_profile.h"
#include "sizing/profile_measure.h"
#include "sizing/shape_search.h"

namespace zaya::cli {

namespace {

using nlohmann::json;

struct SizeArgs {
  std::string profile, config, write, base;
  std::string active, total, flops, gpu_hours, tokens;
  SizeGoal goal;
  Recompute recompute = Recompute::kNone;  // --recompute (goal.recompute)
  int candidates = 5, pick = 1;
  bool json_out = false, explain = false, force = false;
  // zaya size profile
  std::string out;
  std::vector<int> threads;
  ProfileOptions popt;
};

// "760M", "8.3B", "1.5e21", "2T", "64K": a positive count; `flag` names the option in errors.
double parse_amount(const std::string& text, const char* flag) {
  if (text.empty()) return 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  const double scale = unit == ""                   ? 1
                       : unit == "K"                ? 1e3
                       : unit == "M"                ? 1e6
                       : unit == "B" || unit == "G" ? 1e9
                       : unit == "T"                ? 1e12
                                                    : -1;
  ZAYA_CHECK(end != text.c_str() && scale > 0 && std::isfinite(v) && v > 0, flag, ": '", text,
             "' is not a positive amount (a number with an optional K, M, B/G or T: 760M, 8.3B, "
             "1e21)");
  return v * scale;
}

HardwareProfile load_profile(const std::string& name) {
  ZAYA_CHECK(!name.empty(),
             "zaya size needs --profile: a file from `zaya size profile --out FILE` (this "
             "machine, measured) or a built-in one (h100, mi300x)");
  HardwareProfile p;
  if (builtin_profile(name, p)) return p;
  struct stat st {};
  ZAYA_CHECK(::stat(name.c_str(), &st) == 0, "--profile: '", name,
             "' is neither a file nor a built-in profile (h100, mi300x)");
  return read_profile(name);
}

std::string count(double v) {
  char b[32];
  if (v >= 1e9)
    std::snprintf(b, sizeof b, "%.2fB", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(b, sizeof b, "%.1fM", v / 1e6);
  else
    std::snprintf(b, sizeof b, "%.1fK", v / 1e3);
  return b;
}

json candidate_json(const Candidate& k) {
  const TrainMemory& m = k.memory;
  return {{"model", model_config_to_json(k.config)},
          {"params",
           {{"total", k.info.total_params},
            {"non_embedding", k.info.non_embedding_params},
            {"active_non_embedding", k.info.active_non_embedding},
            {"embedding", k.info.embedding_params}}},
          {"micro_batch", k.micro_batch},
          {"max_micro_batch", k.max_micro_batch},
          {"global_batch", k.global_batch},
          {"memory_bytes",
           {{"weights", m.weights},
            {"gradients", m.gradients},
            {"optimizer", m.optimizer},
            {"muon", m.muon},
            {"zero1", m.zero1},
            {"activations", m.activations},
            {"checkpoint", m.checkpoint},
            {"runtime", m.runtime},
            {"total", m.total()}}},
          {"step_seconds",
           {{"gemm", k.step.gemm},
            {"other", k.step.other},
            {"optimizer", k.step.optimizer},
            {"comm", k.step.comm},
            {"total", k.step.total()}}},
          {"threads_per_rank", k.step.threads},
          {"micro_batches_per_step", k.step.micro_batches},
          {"tokens_per_s", k.tokens_per_s},
          {"tokens_per_day", k.tokens_per_day},
          {"mfu", k.mfu},
          {"decode_ms_per_token", k.decode_ms},
          {"hours_for_tokens", k.hours_for_tokens},
          {"note", k.note}};
}

void print_table(const std::vector<Candidate>& cs, const HardwareProfile& p) {
  std::printf(
      "%2s %6s %6s %9s %10s %6s %6s | %8s %8s | %10s %4s | %8s %6s %6s %6s %6s | %9s %6s %8s\n",
      "#", "hidden", "stages", "q/kv x d", "experts", "router", "vocab", "active", "total",
      "mem/rank", "mb", "step s", "gemm", "other", "optim", "comm", "tok/s", "MFU", "decode");
  int i = 1;
  for (const Candidate& k : cs) {
    const ModelConfig& c = k.config;
    char heads[32], experts[32];
    std::snprintf(heads, sizeof heads, "%lld/%lldx%lld", (long long)c.num_q_heads,
                  (long long)c.num_kv_heads, (long long)c.head_dim);
    std::snprintf(experts, sizeof experts, "%lldx%lld", (long long)c.num_experts,
                  (long long)c.expert_hidden);
    const double s = k.step.total();
    auto pct = [&](double part) { return 100.0 * part / s; };
    std::printf(
        "%2d %6lld %6lld %9s %10s %6lld %6lld | %8s %8s | %10s %4lld | %8.3f %5.0f%% %5.0f%% "
        "%5.0f%% %5.0f%% | %9.0f %5.1f%% %6.2fms\n",
        i++, (long long)c.hidden_size, (long long)c.num_stages, heads, experts,
        (long long)c.router_dim, (long long)c.vocab_size,
        count(double(k.info.active_non_embedding)).c_str(),
        count(double(k.info.non_embedding_params)).c_str(),
        format_bytes(double(k.memory.total())).c_str(), (long long)k.micro_batch, s,
        pct(k.step.gemm), pct(k.step.other), pct(k.step.optimizer), pct(k.step.comm),
        k.tokens_per_s, 100 * k.mfu, k.decode_ms);
    if (!k.note.empty()) std::printf("   note: %s\n", k.note.c_str());
  }
  if (!p.measured)
    std::printf(
        "(estimates from published peaks, not measurements: zaya's GPU backend has not been "
        "timed on a GPU yet, docs/status.md)\n");
}

void print_details(const Candidate& k, const SizeGoal& g, const HardwareProfile& p) {
  const std::string values = p.dtype == ProfileDtype::kBf16 ? "bf16" : "fp32";
  const TrainMemory& m = k.memory;
  std::printf(
      "\nmemory per rank at micro-batch %lld x %lld tokens, %d rank%s (ZeRO-1), "
      "recompute %s:\n",
      (long long)k.micro_batch, (long long)k.seq, g.world, g.world == 1 ? "" : "s",
      recompute_plan_name(g.recompute).c_str());
  auto row = [](const char* what, int64_t b) {
    std::printf("  %-34s %12s\n", what, format_bytes(double(b)).c_str());
  };
  row(("weights (" + values + ")").c_str(), m.weights);
  row(("gradients (" + values + ")").c_str(), m.gradients);
  row(values == "bf16" ? "optimizer + fp32 master (range)" : "optimizer state (rank's range)",
      m.optimizer);
  row("Muon matrices + Newton-Schulz", m.muon);
  row("ZeRO-1 buffers", m.zero1);
  row("activations (one micro-batch)", m.activations);
  if (p.device == ProfileDevice::kCpu)
    row("checkpoint snapshot", m.checkpoint);
  else  // beside the total: host memory
    row("(host) snapshot + pinned staging", m.host_snapshot);
  row("runtime (process, libraries)", m.runtime);
  row("total", m.total());
  std::printf("  largest micro-batch that fits:     %lld\n", (long long)k.max_micro_batch);
  std::printf(
      "step (%lld sequences, %lld micro-batch%s per rank, %d thread%s per rank): %.3f s = "
      "products %.3f + other %.3f + optimizer %.3f + communication %.3f\n",
      (long long)k.global_batch, (long long)k.step.micro_batches,
      k.step.micro_batches == 1 ? "" : "es", k.step.threads, k.step.threads == 1 ? "" : "s",
      k.step.total(), k.step.gemm, k.step.other, k.step.optimizer, k.step.comm);
  if (!(g.recompute == RecomputePlan())) {
    const double extra = recompute_flops_per_token(k.config, k.seq, g.recompute);
    std::printf("recompute %s: +%.4g MFLOP per token in the backward (+%.2f %% of a step's)\n",
                recompute_plan_name(g.recompute).c_str(), extra / 1e6,
                100.0 * extra / k.info.train_flops_per_token);
  }
  std::printf("throughput: %.0f tokens/s, %.3g tokens/day", k.tokens_per_s, k.tokens_per_day);
  if (k.hours_for_tokens > 0)
    std::printf(", %.1f h for %.3g tokens (%.0f device-hours)", k.hours_for_tokens, g.tokens,
                k.hours_for_tokens * g.world);
  std::printf("\n");
}

json written_config(const Candidate& k, const std::string& base, const HardwareProfile& p) {
  json j;
  if (!base.empty()) {
    j = read_config_file(base);
    model_config_from_json(j.at("model"), base + ": model");  // validates the base
  }
  j["description"] = "Proposed by zaya size for " + p.name + ": " +
                     count(double(k.info.active_non_embedding)) + " active, " +
                     count(double(k.info.non_embedding_params)) + " total (non-embedding).";
  j["model"] = model_config_to_json(k.config);
  j["train"]["micro_batch"] = k.micro_batch;
  j["train"]["global_batch"] = k.global_batch;
  return j;
}

// zaya size's options (its goal, the shapes to list and what to write).
void add_size_options(CLI::App& size, SizeArgs& a) {
  size.add_option("--profile", a.profile,
                  "hardware profile: a file from `zaya size profile` or built-in h100 / mi300x");
  size.add_option("--config", a.config,
                  "evaluate this zaya config's model instead of proposing shapes (its "
                  "train.micro_batch and global_batch are used unless given)")
      ->check(ExistingFile());
  size.add_option("--active-params", a.active,
                  "goal: active non-embedding parameters (one expert per MoE stage), e.g. 760M");
  size.add_option("--total-params", a.total,
                  "goal: total non-embedding parameters, e.g. 8.3B (with --active-params: both)");
  size.add_option("--flops", a.flops,
                  "goal: compute budget in FLOPs (with --tokens: active = FLOPs / 6 tokens)");
  size.add_option("--gpu-hours", a.gpu_hours,
                  "goal: device-hours budget (with --tokens: the largest shape that trains them "
                  "in time on --world devices)");
  size.add_option("--tokens", a.tokens, "training tokens, e.g. 12T");
  size.add_option("--vocab", a.goal.vocab,
                  "tokenizer vocabulary (padded to a multiple of 64; default 262144 on a GPU "
                  "profile, 4096 on a CPU one)")
      ->check(IntIn(2, int64_t(1) << 24));
  size.add_option("--experts", a.goal.experts, "routed experts per MoE stage (+ skip)")
      ->check(IntIn(1, 256))
      ->capture_default_str();
  size.add_option("--world", a.goal.world, "ranks (GPUs, or CPU processes)")
      ->check(IntIn(1, 1 << 20))
      ->capture_default_str();
  size.add_option("--ranks-per-machine", a.goal.ranks_per_machine,
                  "CPU: ranks sharing one machine's cores and RAM (default: all of --world)")
      ->check(IntIn(1, 4096));
  size.add_option("--seq", a.goal.seq,
                  "sequence length (default 4096 on a GPU profile, 256 on a CPU one; with "
                  "--config, its first phase's seq_len)")
      ->check(IntIn(1, int64_t(1) << 20));
  size.add_option("--global-batch", a.goal.global_batch,
                  "sequences per optimizer step over all ranks (default: one micro-batch per rank)")
      ->check(IntIn(1, int64_t(1) << 30));
  size.add_option("--micro-batch", a.goal.micro_batch,
                  "sequences per micro-batch (default: the largest power of two that fits, at "
                  "most 64)")
      ->check(IntIn(1, int64_t(1) << 20));
  add_mode_option(size, "--recompute", a.recompute, recompute_names(),
                  "train.recompute the plan assumes: none, selective or full (the activations "
                  "kept, and the forward work the backward repeats)");
  size.add_option("--candidates", a.candidates, "shapes to list")
      ->check(IntIn(1, 100))
      ->capture_default_str();
  size.add_option("--pick", a.pick, "which listed shape --write writes (1 = the first)")
      ->check(IntIn(1, 100))
      ->capture_default_str();
  size.add_option("--write", a.write, "write the picked shape as a zaya config to this file")
      ->check(OutputFile());
  size.add_option("--base", a.base,
                  "with --write: copy this config's data and train sections into the new one")
      ->check(ExistingFile());
  size.add_flag("--force", a.force, "with --write: replace an existing file");
  size.add_flag("--json", a.json_out, "print the results as JSON instead of tables");
  size.add_flag("--explain", a.explain, "print the sizing rules and their sources");
}

// zaya size profile's options (what to measure, and how long).
void add_profile_options(CLI::App& prof, SizeArgs& a) {
  prof.add_option("--out", a.out, "profile file to write (under mpirun: to update)")
      ->required()
      ->check(OutputFile());
  prof.add_option("--threads-list", a.popt.threads,
                  "thread counts to measure, e.g. 1,2 (default: 1, powers of two, and all "
                  "cores)")
      ->delimiter(',')
      ->check(IntIn(1, 4096));
  prof.add_option("--gemm-min-time", a.popt.gemm_min_time,
                  "seconds of timed calls per GEMM grid point")
      ->check(Positive())
      ->capture_default_str();
  prof.add_option("--probe-steps", a.popt.probe_steps, "timed steps per probe model")
      ->check(IntIn(1, 100))
      ->capture_default_str();
  prof.add_option("--grid-max", a.popt.grid_max,
                  "largest M, N and K of the GEMM grid {16, 64, 256, 1024, 4096}; products "
                  "beyond it are priced at its rates (smaller: a quicker, rougher profile)")
      ->check(IntIn(16, 4096))
      ->capture_default_str();
  prof.add_option("--membw-elements", a.popt.membw_elements,
                  "doubles per STREAM array (default: STREAM's rule, 4 x the last-level cache; "
                  "smaller arrays measure the cache, not memory)")
      ->check(IntIn(int64_t(1) << 10, int64_t(1) << 32));
  prof.add_flag("--force", a.force, "replace an existing profile (single process)");
}

// zaya size profile under mpirun: the collectives and the rates of the ranks sharing the
// machine, added to the profile at --out.
void add_shared_rates(const SizeArgs& a, dist::Communicator& comm) {
  HardwareProfile p = read_profile(a.out);  // every rank checks it is readable
  ZAYA_CHECK(p.device == ProfileDevice::kCpu, "--out: '", a.out, "' is not a CPU profile");
  const CommRates c = measure_comm_rates(comm, stdout);
  // Each rank's share of the cores, measured while every rank runs (other ranks' tables go
  // to /dev/null).
  const int threads = std::max(1, p.cores / comm.world_size());
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> devnull(std::fopen("/dev/null", "w"),
                                                          &std::fclose);
  ZAYA_CHECK(devnull != nullptr, "cannot open /dev/null");
  const ProfileRates shared =
      measure_rates(threads, p, a.popt, comm.rank() == 0 ? stdout : devnull.get(), &comm);
  if (comm.rank() == 0) {
    p.comm = c;
    std::erase_if(p.rates, [&](const ProfileRates& r) {
      return r.threads == shared.threads && r.ranks == shared.ranks;
    });
    p.rates.push_back(shared);
    write_profile(p, a.out);
    std::printf("added the collectives and the rates of %d ranks sharing the machine to %s\n",
                c.world, a.out.c_str());
  }
}

// zaya size profile: this machine's profile measured and written to --out (under mpirun, the
// collectives added to it).
int run_profile(const SizeArgs& a) {
  auto comm = dist::make_communicator();
  if (comm->world_size() > 1) {
    add_shared_rates(a, *comm);
    return 0;
  }
  // (Under mpirun the profile is updated in place: that is the point of the run.)
  check_output({"--out", a.out, OutputKind::kFile, a.force, {}});
  HardwareProfile p = measure_compute_profile(a.popt, stdout);
  char host[256] = "this machine";
  gethostname(host, sizeof host);
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  p.name = std::string(host) + " (" + std::to_string(p.cores) + " cores, measured)";
  p.source = std::string("zaya size profile, ") + when;
  write_profile(p, a.out);
  std::printf("wrote %s (runtime %s, memory %s)\n", a.out.c_str(),
              format_bytes(double(p.runtime_bytes)).c_str(),
              format_bytes(double(p.memory_bytes)).c_str());
  return 0;
}

// zaya size --explain without a profile: the GPU and the CPU rules.
void print_all_rules() {
  for (const char* name : {"mi300x", "cpu"}) {
    HardwareProfile p;
    if (!builtin_profile(name, p)) p.device = ProfileDevice::kCpu;
    std::printf("%s rules:\n", p.device == ProfileDevice::kGpu ? "GPU" : "CPU");
    for (const std::string& r : sizing_rules(p)) std::printf("  - %s\n", r.c_str());
  }
  std::printf("sources and the measurements behind them: docs/sizing.md\n");
}

// The shapes to report: --config's (its train and data sections fill the goal's blanks) or the
// proposals for the goal.
std::vector<Candidate> size_candidates(const SizeArgs& a, SizeGoal& g, const HardwareProfile& p) {
  if (a.config.empty()) {
    std::vector<Candidate> cands = propose_shapes(g, p, a.candidates);
    ZAYA_CHECK(!cands.empty(), "no shape follows the rules and fits this goal on '", p.name,
               "' (zaya size --explain lists the rules; try another target, --world or --seq)");
    return cands;
  }
  ZAYA_CHECK(a.active.empty() && a.total.empty() && a.flops.empty() && a.gpu_hours.empty(),
             "--config evaluates one shape: leave out --active-params, --total-params, "
             "--flops and --gpu-hours");
  const json root = read_config_file(a.config);
  const ModelConfig c = model_config_from_json(root.at("model"), a.config + ": model");
  if (g.micro_batch == 0) g.micro_batch = root.value("/train/micro_batch"_json_pointer, int64_t(0));
  if (g.global_batch == 0)
    g.global_batch = root.value("/train/global_batch"_json_pointer, int64_t(0));
  if (g.seq == 0 && root.contains("data") && root["data"].contains("phases") &&
      !root["data"]["phases"].empty())
    g.seq = root["data"]["phases"][0].value("seq_len", int64_t(0));
  return {evaluate_config(c, g, p)};
}

// The candidates as JSON or as the table and the picked one's details; then --write.
void report_candidates(const SizeArgs& a, const std::vector<Candidate>& cands, const SizeGoal& g,
                       const HardwareProfile& p) {
  if (a.json_out) {
    json out = json::array();
    for (const Candidate& k : cands) out.push_back(candidate_json(k));
    std::printf("%s\n", json{{"profile", p.name}, {"candidates", out}}.dump(2).c_str());
  } else {
    std::printf("profile: %s (%s)\n", p.name.c_str(), p.source.c_str());
    print_table(cands, p);
    ZAYA_CHECK(a.pick <= int(cands.size()), "--pick ", a.pick, ": only ", cands.size(),
               " shape(s) listed");
    print_details(cands[size_t(a.pick - 1)], g, p);
  }
  if (!a.write.empty()) {
    ZAYA_CHECK(a.pick <= int(cands.size()), "--pick ", a.pick, ": only ", cands.size(),
               " shape(s) listed");
    std::vector<std::string> inputs;
    for (const std::string* in : {&a.config, &a.base, &a.profile})
      if (!in->empty()) inputs.push_back(*in);
    write_output_file({"--write", a.write, OutputKind::kFile, a.force, inputs},
                      written_config(cands[size_t(a.pick - 1)], a.base, p).dump(2) + "\n");
    if (!a.json_out) std::printf("wrote %s\n", a.write.c_str());
  }
}

// zaya size: the rules (--explain), or the shapes for a goal or a config on a profile.
int run_size(const SizeArgs& a) {
  if (a.explain && a.profile.empty()) {
    print_all_rules();
    return 0;
  }
  const HardwareProfile p = load_profile(a.profile);
  if (a.explain) {
    std::printf("rules for %s:\n", p.name.c_str());
    for (const std::string& r : sizing_rules(p)) std::printf("  - %s\n", r.c_str());
    std::printf("sources and the measurements behind them: docs/sizing.md\n");
    return 0;
  }
  SizeGoal g = a.goal;
  g.recompute = a.recompute;
  g.active_params = parse_amount(a.active, "--active-params");
  g.total_params = parse_amount(a.total, "--total-params");
  g.flops = parse_amount(a.flops, "--flops");
  g.gpu_hours = parse_amount(a.gpu_hours, "--gpu-hours");
  g.tokens = parse_amount(a.tokens, "--tokens");
  const std::vector<Candidate> cands = size_candidates(a, g, p);
  report_candidates(a, cands, g, p);
  return 0;
}

}  // namespace

Runner add_size_commands(CLI::App& app) {
  auto args = std::make_shared<SizeArgs>();
  auto* size = app.add_subcommand(
      "size",
      "ZAYA1 shapes and training plans for a hardware profile: parameter counts, memory per rank "
      "under ZeRO-1, the largest micro-batch, predicted step time and throughput");
  add_size_options(*size, *args);
  auto* prof = size->add_subcommand(
      "profile",
      "Measure this machine's hardware profile for zaya size: the GEMM grid, STREAM triad and "
      "calibration steps per thread count; under mpirun -np N (N > 1), the collectives, added to "
      "an existing profile");
  add_profile_options(*prof, *args);
  return [=]() -> int {
    if (*prof) return run_profile(*args);
    if (!*size) return kNotMine;
    return run_size(*args);
  };
}

}  // namespace zaya::cli
