// zaya info --config C [--seq N] [--world N] [--micro-batch N] [--activations fp32|bf16]
//           [--recompute MODE] [--zero 1|2] [--context-parallel N] [--lm-head-chunks T,V];
// zaya info --devices
#include "cmd_info.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "backend/blas_report.h"
#include "backend/device_registry.h"
#include "backend/vector_path.h"
#include "core/error.h"
#include "model/config.h"
#include "model/model_info.h"
#include "model/recompute.h"
#include "sizing/gpu_plan.h"

namespace zaya::cli {

namespace {

// Bytes per activation value, by the name --activations takes.
const std::map<std::string, int>& activation_widths() {
  static const std::map<std::string, int> widths{{"fp32", 4}, {"bf16", 2}};
  return widths;
}

struct InfoArgs {
  std::string config;
  int64_t seq = 0;
  GpuPlanRequest plan;
  Recompute recompute = Recompute::kNone;  // both kinds of stage (the plan's RecomputePlan)
  int world = 1;
  bool devices = false;
};

}  // namespace

Runner add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  auto* info = app.add_subcommand(
      "info",
      "Parameter counts, FLOPs per token, KV-cache size and the memory plan per GPU; or the "
      "devices --device takes (--devices)");
  info->add_option("--config", args->config, "zaya JSON config (e.g. configs/zaya1-base.json)")
      ->check(ExistingFile());
  info->add_flag("--devices", args->devices,
                 "list the devices --device takes: whether each is usable here (and why not) and "
                 "what it can do");
  info->add_option("--seq", args->seq,
                   "sequence length for the attention FLOPs and the GPU memory plan (default: the "
                   "config's max_seq_len, which it may not pass)")
      ->check(PositiveInt<int64_t>());
  info->add_option("--world", args->world,
                   "ranks of the ZeRO-1 job for the GPU memory plan (each holds 1/world of the "
                   "optimizer state and fp32 master weights)")
      ->check(IntIn(1, 1 << 20));
  info->add_option_function<std::string>(
      "--lm-head-chunks",
      [args](const std::string& text) {
        args->plan.options.lm_head_chunks = parse_lm_head_chunks(text);
      },
      "TOKENS,VOCAB: the plan's LM head and loss in blocks of that many logits "
      "(train.lm_head_chunk_*; default: the [tokens x vocab] logits materialised)");
  info->add_option("--micro-batch", args->plan.micro_batch,
                   "sequences per micro-batch in the GPU memory plan")
      ->capture_default_str()
      ->check(IntIn(1, 1 << 16));
  add_mode_option(*info, "--activations", args->plan.options.activations, activation_widths(),
                  "the plan's activations: fp32 or bf16 (zaya train --activation-storage)");
  add_mode_option(*info, "--recompute", args->recompute, recompute_names(),
                  "the plan's train.recompute: none, selective or full");
  info->add_option("--zero", args->plan.options.zero_stage,
                   "the plan's ZeRO stage: 1 (optimizer state sharded) or 2 (gradients too: "
                   "train.zero_stage)")
      ->capture_default_str()
      ->check(IntIn(1, 2));
  info->add_option("--context-parallel", args->plan.context_parallel,
                   "ranks per sequence in the plan (each holds seq / N of it); must divide --world")
      ->capture_default_str()
      ->check(IntIn(1, 1 << 20));
  return [=]() -> int {
    if (!*info) return kNotMine;
    if (args->devices) {
      std::printf("devices (--device NAME):\n%s", device_listing().c_str());
      if (args->config.empty()) return 0;
      std::printf("\n");
    }
    ZAYA_CHECK(!args->config.empty(), "zaya info needs --config FILE (or --devices)");
    const ModelConfig c = load_model_config(args->config);
    const int64_t seq = args->seq > 0 ? args->seq : c.max_seq_len;
    ZAYA_CHECK(seq <= c.max_seq_len, "--seq: ", seq, " is past the model's max_seq_len ",
               c.max_seq_len, " ('model.max_seq_len' of ", args->config, ")");
    std::printf("%s", format_model_info(c, seq).c_str());
    GpuPlanRequest plan = args->plan;
    plan.seq = seq;
    plan.world = args->world;
    plan.options.recompute = args->recompute;
    std::printf("%s", format_gpu_memory_plan(c, plan).c_str());
    std::printf("%s", blas_info_section().c_str());
    std::printf("%s", format_vector_path_info().c_str());
    return 0;
  };
}

}  // namespace zaya::cli
