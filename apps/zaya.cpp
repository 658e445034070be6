// zaya: the command-line front. It only parses arguments and calls into the library.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include <omp.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "backend/cpu/blas_startup.h"
#include "backend/device_select.h"
#include "bench/step_bench.h"
#include "ckpt/hf_interop.h"
#include "cmd_aegis.h"
#include "cmd_ckpt.h"
#include "cmd_comm.h"
#include "cmd_data.h"
#include "cmd_decode_bench.h"
#include "cmd_eval.h"
#include "cmd_generate.h"
#include "cmd_hwbench.h"
#include "cmd_score.h"
#include "cmd_serve.h"
#include "cmd_size.h"
#include "cmd_tokenizer.h"
#include "cmd_train.h"
#include "core/error.h"
#include "dist/dist_context.h"
#include "model/config.h"
#include "model/debug_dump.h"
#include "model/model_info.h"
#include "model/weights_io.h"
#include "model/zaya_model.h"
#include "sizing/gpu_plan.h"

namespace {

// OpenBLAS itself always runs single-threaded: backend/cpu/matmul.cpp cuts every product into tiles
// by its shape and runs the tiles on the OpenMP threads, so results do not depend on this count.
void set_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

}  // namespace

int main(int argc, char** argv) {
  // The BLAS kernels first: choosing them may restart the process, which must happen before MPI
  // starts (backend/cpu/blas_startup.h).
  try {
    zaya::cpu::blas::prepare_blas(argc, argv);
  } catch (const zaya::Error& e) {
    std::fprintf(stderr, "%szaya: error: %s\n", zaya::dist::rank_tag().c_str(), e.what());
    return 1;
  }
  // MPI_Init under mpirun/srun (before parsing: it may edit argv); rank 0 alone prints.
  zaya::dist::DistContext dist(&argc, &argv);
  CLI::App app{"zaya: pretraining ZAYA1-style Mixture-of-Experts language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "zaya 0.1.0");
  int threads = 0;
  app.add_option("--threads", threads,
                 "CPU threads (default: all cores, split between the ranks of one machine; zaya "
                 "train lowers it while other work holds the CPU, see --fixed-threads)")
      ->check(CLI::Range(0, 4096, "an integer thread count in [0, 4096]"));
  std::string blas_kernels = "auto";  // read by prepare_blas before parsing; here for --help
  app.add_option("--blas-kernels", blas_kernels, zaya::cpu::blas::kBlasKernelsFlagHelp)
      ->capture_default_str();

  // zaya info
  auto* info = app.add_subcommand(
      "info", "Parameter counts, FLOPs per token, KV-cache size and the memory plan per GPU");
  std::string info_config;
  int64_t info_seq = 0;
  info->add_option("--config", info_config, "zaya JSON config (e.g. configs/zaya1-base.json)")
      ->required();
  info->add_option("--seq", info_seq,
                   "sequence length for the attention FLOPs and the GPU memory plan (default: the "
                   "config's max_seq_len)");
  int info_world = 1;
  info->add_option("--world", info_world,
                   "ranks of the ZeRO-1 job for the GPU memory plan (each holds 1/world of the "
                   "optimizer state and fp32 master weights)")
      ->check(CLI::Range(1, 1 << 20));

  // zaya bench step
  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto* step = bench->add_subcommand("step",
                                     "Forward+backward tokens/s of the model on random "
                                     "tokens (random init)");
  std::string step_config;
  zaya::StepBenchOptions sopt;
  bool step_json = false;
  step->add_option("--config", step_config, "zaya JSON config")->required();
  step->add_option("--batch", sopt.batch, "sequences per step")->capture_default_str();
  step->add_option("--seq", sopt.seq, "tokens per sequence")->capture_default_str();
  step->add_option("--steps", sopt.steps, "timed steps")->capture_default_str();
  step->add_option("--warmup", sopt.warmup, "untimed warm-up steps")->capture_default_str();
  step->add_option("--seed", sopt.seed, "init and token seed")->capture_default_str();
  step->add_option("--save-model", sopt.save_model_dir,
                   "write the benchmarked model (config.json + model.safetensors) to this "
                   "directory, e.g. for the PyTorch peer");
  step->add_option("--device", sopt.device, zaya::kDeviceFlagHelp)->capture_default_str();
  step->add_option("--precision", sopt.precision, zaya::kPrecisionFlagHelp)->capture_default_str();
  step->add_flag("--optimizer", sopt.optimizer,
                 "time the optimizer's step too (AdamW and Muon with their default settings, on "
                 "the same device), and print its share");
  std::string step_chunks;
  step->add_option(
      "--lm-head-chunks", step_chunks,
      "TOKENS,VOCAB: the LM head and loss in blocks of that many logits, never the "
      "whole [tokens x vocab] (default: the logits materialised, as the PyTorch peer "
      "does; at ZAYA1's 262,272 tokens of vocabulary a GPU run wants e.g. 4096,32768)");
  step->add_flag("--json", step_json, "print one JSON line instead of text");

  // zaya debug-dump
  auto* dump =
      app.add_subcommand("debug-dump",
                         "Write a random non-trivial model and its logits/loss/gradients on random "
                         "tokens (for checking against an independent implementation)");
  std::string dump_config, dump_out;
  zaya::DumpOptions dopt;
  dump->add_option("--config", dump_config, "zaya JSON config")->required();
  dump->add_option("--out", dump_out, "output directory")->required();
  dump->add_option("--seed", dopt.seed, "weights and tokens seed")->capture_default_str();
  dump->add_option("--batch", dopt.batch, "sequences")->capture_default_str();
  dump->add_option("--seq", dopt.seq, "tokens per sequence")->capture_default_str();

  // zaya forward
  auto* fwd = app.add_subcommand(
      "forward", "Run a model directory on a token sequence; print the mean next-token loss");
  std::string fwd_model, fwd_tokens;
  fwd->add_option("--model", fwd_model,
                  "Hugging Face model directory or zaya checkpoint (as for zaya score)")
      ->required();
  fwd->add_option("--tokens", fwd_tokens, "comma-separated token ids, e.g. 2,17,99")->required();
  std::string fwd_device = "auto", fwd_precision = "auto";
  fwd->add_option("--device", fwd_device, zaya::kDeviceFlagHelp)->capture_default_str();
  fwd->add_option("--precision", fwd_precision, zaya::kPrecisionFlagHelp)->capture_default_str();

  // Command families registered from apps/cmd_*.cpp (see apps/commands.h).
  std::vector<zaya::cli::Runner> runners;
  runners.push_back(zaya::cli::add_tokenizer_commands(app));
  runners.push_back(zaya::cli::add_data_commands(app));
  runners.push_back(zaya::cli::add_train_commands(app));
  runners.push_back(zaya::cli::add_ckpt_commands(app));
  runners.push_back(zaya::cli::add_aegis_commands(app));
  runners.push_back(zaya::cli::add_score_commands(app));
  runners.push_back(zaya::cli::add_eval_commands(app));
  runners.push_back(zaya::cli::add_serve_commands(app));
  runners.push_back(zaya::cli::add_comm_commands(*bench));
  runners.push_back(zaya::cli::add_hwbench_commands(*bench));
  runners.push_back(zaya::cli::add_decode_bench_command(*bench));
  runners.push_back(zaya::cli::add_size_commands(app));
  runners.push_back(zaya::cli::add_generate_commands(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A mistyped subcommand is left over as an extra argument; say so instead of CLI11's "A
    // subcommand is required".
    if (app.get_subcommands().empty() && !app.remaining().empty() &&
        app.remaining().front().rfind("-", 0) != 0) {
      std::string known;
      for (const CLI::App* sub : app.get_subcommands({}))
        known += (known.empty() ? "" : ", ") + sub->get_name();
      std::fprintf(stderr, "zaya: error: unknown subcommand '%s' (the subcommands are: %s)\n",
                   app.remaining().front().c_str(), known.c_str());
      return 106;
    }
    return app.exit(e);
  }
  set_threads(threads > 0 ? threads : zaya::dist::threads_per_local_rank());

  try {
    for (const auto& run : runners) {
      const int rc = run();
      if (rc != zaya::cli::kNotMine) return rc;
    }
    if (*info) {
      const zaya::ModelConfig c = zaya::load_model_config(info_config);
      const int64_t seq = info_seq > 0 ? info_seq : c.max_seq_len;
      std::printf("%s", zaya::format_model_info(c, seq).c_str());
      std::printf("%s", zaya::format_gpu_memory_plan(c, seq, info_world).c_str());
      std::printf("%s", zaya::cpu::blas::format_blas_info(zaya::cpu::blas::blas_state()).c_str());
    } else if (*step) {
      const zaya::ModelConfig c = zaya::load_model_config(step_config);
      ZAYA_CHECK(sopt.batch > 0 && sopt.seq > 0 && sopt.steps > 0 && sopt.warmup >= 0,
                 "--batch, --seq and --steps must be positive, --warmup non-negative");
      if (!step_chunks.empty()) {
        int t = 0, v = 0;
        char rest = 0;
        ZAYA_CHECK(
            std::sscanf(step_chunks.c_str(), "%d,%d%c", &t, &v, &rest) == 2 && t > 0 && v > 0,
            "--lm-head-chunks: expected TOKENS,VOCAB (two positive integers), got '", step_chunks,
            "'");
        sopt.lm_head_chunk_tokens = t;
        sopt.lm_head_chunk_vocab = v;
      }
      const int nthreads = omp_get_max_threads();
      if (!step_json) {
        std::printf("bench step: %s, batch %d x seq %d, %d threads\n", step_config.c_str(),
                    sopt.batch, sopt.seq, nthreads);
        std::printf("%s\n", zaya::cpu::blas::blas_summary(zaya::cpu::blas::blas_state()).c_str());
      }
      const auto r = zaya::run_step_bench(c, sopt, !step_json);
      if (step_json) {
        std::printf("%s\n", nlohmann::json{{"impl", "zaya"},
                                           {"device", r.device},
                                           {"tokens_per_s", r.tokens_per_s},
                                           {"step_ms", r.step_ms},
                                           {"optimizer_ms", r.optimizer_ms},
                                           {"loss", r.loss},
                                           {"threads", nthreads},
                                           {"blas_kernels", zaya::cpu::blas::blas_state().kernels},
                                           {"arena_bytes", r.arena_bytes},
                                           {"train_flops_per_token", r.train_flops_per_token},
                                           {"device_memory_bytes", r.device_memory_bytes},
                                           {"host_reads_per_step", r.host_reads_per_step},
                                           {"host_read_bytes_per_step", r.host_read_bytes_per_step}}
                                .dump()
                                .c_str());
      } else {
        std::printf(
            "zaya (%s): %.1f ms/step, %.0f tokens/s (fwd+bwd%s), loss %.4f, arena %.1f MiB\n",
            r.device.c_str(), r.step_ms, r.tokens_per_s, sopt.optimizer ? "+optimizer" : "", r.loss,
            double(r.arena_bytes) / (1 << 20));
        if (sopt.optimizer)
          std::printf("  optimizer: %.1f ms/step (%.1f %% of the step)\n", r.optimizer_ms,
                      100.0 * r.optimizer_ms / r.step_ms);
        if (!r.host_memory && r.host_reads_per_step > 0)
          std::printf("  %.0f copies to the host per step (%.1f MiB), each a GPU synchronisation\n",
                      r.host_reads_per_step, r.host_read_bytes_per_step / (1 << 20));
      }
    } else if (*dump) {
      const zaya::ModelConfig c = zaya::load_model_config(dump_config);
      zaya::debug_dump(c, dopt, dump_out);
      std::printf("debug-dump: wrote %s/model and %s/outputs.safetensors\n", dump_out.c_str(),
                  dump_out.c_str());
    } else if (*fwd) {
      std::vector<int32_t> tokens;
      size_t pos = 0;
      while (pos <= fwd_tokens.size()) {
        const size_t comma = std::min(fwd_tokens.find(',', pos), fwd_tokens.size());
        const std::string item = fwd_tokens.substr(pos, comma - pos);
        char* end = nullptr;
        errno = 0;
        const long v = std::strtol(item.c_str(), &end, 10);
        ZAYA_CHECK(!item.empty() && end && *end == '\0' && errno == 0 && v >= 0 && v <= INT32_MAX,
                   "--tokens: '", item,
                   "' is not a token id (a non-negative integer; expected e.g. --tokens 2,17,99)");
        tokens.push_back(int32_t(v));
        pos = comma + 1;
      }
      const zaya::ComputeDevice device = zaya::open_device(fwd_device, fwd_precision);
      zaya::LoadedModel loaded = zaya::load_model_any(fwd_model);
      for (const auto& w : loaded.warnings) std::fprintf(stderr, "zaya: warning: %s\n", w.c_str());
      auto& model = loaded.model;
      model->set_backend(*device.backend);
      const int S = int(tokens.size());
      ZAYA_CHECK(S >= 2, "--tokens: a loss needs at least 2 tokens (each predicts the next), got ",
                 S);
      const auto targets = zaya::ZayaModel::shifted_targets(tokens, 1, S);
      const float loss = model->forward(tokens, targets, 1, S);
      std::printf(
          "%s\n",
          nlohmann::json{{"tokens", S}, {"loss", loss}, {"perplexity", std::exp(double(loss))}}
              .dump()
              .c_str());
    } else {
      for (const auto& run : runners) {
        const int rc = run();
        if (rc != zaya::cli::kNotMine) return rc;
      }
    }
  } catch (const zaya::Error& e) {
    std::fprintf(stderr, "%szaya: error: %s\n", zaya::dist::rank_tag().c_str(), e.what());
    dist.abort_job(1);
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "%szaya: error: out of memory (a buffer could not be allocated); a smaller "
                 "micro-batch, sequence or model, or fewer ranks per machine, needs less\n",
                 zaya::dist::rank_tag().c_str());
    dist.abort_job(1);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%szaya: unexpected error: %s\n", zaya::dist::rank_tag().c_str(),
                 e.what());
    dist.abort_job(1);
    return 1;
  }
  return 0;
}
