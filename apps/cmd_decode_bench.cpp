// zaya bench decode: the CCA-cache decoder's throughput at several batch sizes on a random model
// of a config, with its time to first token, the bytes a step reads and the bound they set at the
// memory bandwidth measured in the same run (bench/decode_vs_pytorch.sh adds the PyTorch peer).
#include "cmd_decode_bench.h"

#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "backend/blas_report.h"
#include "backend/vector_path.h"
#include "bench/decode_bench.h"
#include "core/error.h"
#include "io/output_path.h"
#include "model/config.h"

namespace zaya::cli {

Runner add_decode_bench_command(CLI::App& bench) {
  struct Args {
    std::string config, json_out;
    std::vector<int> batches = {1, 16};
    DecodeBenchOptions opt;
    bool force = false;
  };
  auto a = std::make_shared<Args>();
  auto* dec = bench.add_subcommand(
      "decode",
      "Decode tokens/s with the CCA cache at each batch size (random model of a config, greedy), "
      "time to first token, and the bound the bytes a step reads set at this machine's measured "
      "memory bandwidth");
  dec->add_option("--config", a->config, "zaya JSON config (e.g. configs/small.json)")
      ->required()
      ->check(ExistingFile());
  dec->add_option("--batch-list", a->batches, "batch sizes (sequences decoded together)")
      ->delimiter(',')
      ->check(IntIn(1, 4096))
      ->capture_default_str();
  dec->add_option("--prompt", a->opt.prompt, "prompt tokens per sequence")
      ->check(IntIn(1, 1 << 24))
      ->capture_default_str();
  dec->add_option("--new-tokens", a->opt.new_tokens, "tokens decoded per sequence")
      ->check(IntIn(2, 1 << 24))
      ->capture_default_str();
  dec->add_option("--seed", a->opt.seed, "weights and prompts")
      ->capture_default_str()
      ->check(Seed());
  dec->add_option("--save-model", a->opt.save_model_dir,
                  "also write the random model here (HF layout), for the PyTorch peer")
      ->check(OutputDir());
  dec->add_option("--json", a->json_out, "also write the results to this JSON file")
      ->check(OutputFile());
  dec->add_flag("--force", a->force, "replace an existing --json file or --save-model directory");
  return [=]() -> int {
    if (!*dec) return kNotMine;
    const ModelConfig c = load_model_config(a->config);
    DecodeBenchOptions opt = a->opt;
    opt.batches = a->batches;
    // Both outputs are checked before the benchmark runs, so a refusal costs nothing.
    const OutputRule json_out_rule{"--json", a->json_out, OutputKind::kFile, a->force, {a->config}};
    if (!a->json_out.empty()) check_output(json_out_rule);
    std::optional<StagedOutput> model_out;
    if (!opt.save_model_dir.empty()) {
      model_out.emplace(OutputRule{
          "--save-model", opt.save_model_dir, OutputKind::kDirectory, a->force, {a->config}});
      opt.save_model_dir = model_out->path();
    }
    std::printf("decode: %s, prompts of %d tokens, %d new tokens per sequence\n", a->config.c_str(),
                opt.prompt, opt.new_tokens);
    std::printf("%s\n", blas_summary_line().c_str());
    std::printf("%s\n", vector_path_summary_line().c_str());
    const DecodeBenchResult r = run_decode_bench(c, opt, stdout);
    if (model_out) model_out->commit();
    std::printf(
        "cache: %lld bytes per token of context (grouped-query attention over the hidden "
        "size: %lld, %.1fx; multi-head: %lld, %.1fx)\n",
        (long long)r.cache_bytes_per_token, (long long)r.gqa_cache_bytes_per_token,
        double(r.gqa_cache_bytes_per_token) / double(r.cache_bytes_per_token),
        (long long)r.mha_cache_bytes_per_token,
        double(r.mha_cache_bytes_per_token) / double(r.cache_bytes_per_token));
    if (!a->json_out.empty()) {
      nlohmann::json j = {{"config", a->config},
                          {"prompt", opt.prompt},
                          {"new_tokens", opt.new_tokens},
                          {"bandwidth_gbs", r.bandwidth_gbs},
                          {"bandwidth_before_gbs", r.bandwidth_before_gbs},
                          {"bandwidth_after_gbs", r.bandwidth_after_gbs},
                          {"blas_kernels", blas_kernels()},
                          {"cache_bytes_per_token", r.cache_bytes_per_token},
                          {"gqa_cache_bytes_per_token", r.gqa_cache_bytes_per_token},
                          {"mha_cache_bytes_per_token", r.mha_cache_bytes_per_token},
                          {"rows", nlohmann::json::array()}};
      for (const DecodeBenchRow& row : r.rows)
        j["rows"].push_back({{"batch", row.batch},
                             {"tokens_per_s", row.tokens_per_s},
                             {"step_ms", row.step_ms},
                             {"ttft_ms", row.ttft_ms},
                             {"bytes_per_step", row.bytes_per_step},
                             {"experts_per_stage", row.experts_per_stage},
                             {"bound_tokens_per_s", row.bound_tokens_per_s}});
      write_output_file(json_out_rule, j.dump(2) + "\n");
    }
    return 0;
  };
}

}  // namespace zaya::cli
