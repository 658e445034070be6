// zaya debug-dump --config C --out DIR [--seed N] [--batch N] [--seq N] [--force]
#include "cmd_debug_dump.h"

#include <cstdio>
#include <memory>
#include <string>

#include "core/error.h"
#include "io/output_path.h"
#include "model/config.h"
#include "model/debug_dump.h"

namespace zaya::cli {

namespace {

struct DumpArgs {
  std::string config, out;
  DumpOptions opt;
  bool force = false;
};

}  // namespace

Runner add_debug_dump_command(CLI::App& app) {
  auto args = std::make_shared<DumpArgs>();
  auto* dump =
      app.add_subcommand("debug-dump",
                         "Write a random non-trivial model and its logits/loss/gradients on random "
                         "tokens (for checking against an independent implementation)");
  dump->add_option("--config", args->config, "zaya JSON config")->required()->check(ExistingFile());
  dump->add_option("--out", args->out, "output directory")->required()->check(OutputDir());
  dump->add_option("--seed", args->opt.seed, "weights and tokens seed")
      ->capture_default_str()
      ->check(Seed());
  dump->add_option("--batch", args->opt.batch, "sequences")
      ->capture_default_str()
      ->check(IntIn(1, 1 << 16));
  dump->add_option("--seq", args->opt.seq, "tokens per sequence")
      ->capture_default_str()
      ->check(PositiveInt());
  dump->add_flag("--force", args->force, "replace an existing, non-empty --out directory");
  return [=]() -> int {
    if (!*dump) return kNotMine;
    const ModelConfig c = load_model_config(args->config);
    ZAYA_CHECK(args->opt.seq <= c.max_seq_len, "--seq: ", args->opt.seq,
               " is past the model's max_seq_len ", c.max_seq_len, " ('model.max_seq_len' of ",
               args->config, ")");
    StagedOutput out({"--out", args->out, OutputKind::kDirectory, args->force, {args->config}});
    debug_dump(c, args->opt, out.path());
    out.commit();
    std::printf("debug-dump: wrote %s/model and %s/outputs.safetensors\n", args->out.c_str(),
                args->out.c_str());
    return 0;
  };
}

}  // namespace zaya::cli
