// zaya eval --model M --config C [--phase NAME | --seq N --rope-theta T] [--windows K]
//           [--micro-batch B] [--context-parallel N]
// zaya eval --model M --tasks FILE[,FILE...] [--task-format F] [--limit N] [--shots K --seed S]
//           [--log-samples OUT.jsonl [--force]] [--tokenizer T] [--batch B]
#include "cmd_eval.h"

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "backend/device_select.h"
#include "ckpt/hf_interop.h"
#include "core/error.h"
#include "data/data_config.h"
#include "data/loader.h"
#include "dist/communicator.h"
#include "dist/rank_grid.h"
#include "eval_tasks.h"
#include "input_limit_flags.h"
#include "model/context_shard.h"
#include "train/evaluate.h"

namespace zaya::cli {

namespace {

struct EvalArgs {
  std::string model, config, phase;
  int seq = 0, windows = 16, micro_batch = 1, context_parallel = 1;
  double rope_theta = 0;
  TaskEvalOptions tasks;
};

void add_task_options(CLI::App& eval, TaskEvalOptions& t) {
  eval.add_option(
          "--tasks", t.files,
          "benchmark task files (JSON lines), comma-separated: instead of the validation "
          "loss, score each item's choices by log-likelihood as lm-evaluation-harness does "
          "and print one JSON line per task in its 'results' layout. Layouts, detected by "
          "their fields: hellaswag (ctx or ctx_a/ctx_b/activity_label, endings, label), arc "
          "and openbookqa (question or question_stem, choices {text, label}, answerKey), "
          "mmlu (question, choices, answer, optional subject), piqa (goal, sol1, sol2, "
          "label), winogrande (sentence, option1, option2, answer; partial scoring), lambada "
          "(text: its last word by greedy match, and perplexity), plain (context, choices, "
          "gold)")
      ->delimiter(',');
  eval.add_option("--task-format", t.format,
                  "the layout of every --tasks file instead of detecting it: hellaswag, arc, mmlu, "
                  "piqa, winogrande, lambada or plain");
  eval.add_option("--tokenizer", t.tokenizer,
                  "with --tasks: tokenizer.json (default: the model directory's)");
  eval.add_option("--limit", t.limit, "with --tasks: the first N items of each task (0: all)")
      ->check(NonNegativeInt())
      ->capture_default_str();
  eval.add_option("--shots", t.shots,
                  "with --tasks: few-shot examples before each item, drawn from the same file "
                  "without the item (answered, separated by blank lines)")
      ->check(NonNegativeInt())
      ->capture_default_str();
  eval.add_option("--seed", t.seed, "with --shots: which examples each item gets")
      ->capture_default_str()
      ->check(Seed());
  eval.add_option("--log-samples", t.log_samples,
                  "with --tasks: write one JSON line per item: task, doc_id, line, target, "
                  "loglikelihoods (one per choice), is_greedy, acc, acc_norm")
      ->check(OutputFile());
  eval.add_flag("--force", t.force, "with --log-samples: replace an existing file");
  eval.add_option("--batch", t.batch,
                  "with --tasks: sequences (choices) decoded together; the choices of one context "
                  "share its prefill")
      ->check(PositiveInt())
      ->capture_default_str();
  add_max_record_bytes_flag(eval, t.max_record_bytes, "line of a --tasks file");
  eval.add_option(
          "--device", t.device,
          std::string("with --tasks: where the decoder computes, in fp32: ") + kDeviceFlagHelp)
      ->capture_default_str();
}

}  // namespace

Runner add_eval_commands(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* eval = app.add_subcommand(
      "eval",
      "Validation loss of a model on the held-out windows of a config's data, at any sequence "
      "length; under mpirun the windows are shared by the ranks (and with --context-parallel each "
      "window is spread over several). With --tasks: benchmark accuracy (HellaSwag, ARC, MMLU, "
      "PIQA, Winogrande, LAMBADA...) by log-likelihood, as lm-evaluation-harness scores it, "
      "the items split over the ranks under mpirun");
  eval->add_option("--model", a->model,
                   "Hugging Face model directory, zaya checkpoint step-N/ or a run's checkpoint "
                   "root (newest complete checkpoint)")
      ->required()
      ->check(ExistingDir());
  eval->add_option("--config", a->config,
                   "zaya config whose 'data' section names the data (the validation loss; needed "
                   "unless --tasks)")
      ->check(ExistingFile());
  eval->add_option("--phase", a->phase,
                   "data phase whose seq_len and rope_theta to use (default: the last phase)");
  eval->add_option("--seq", a->seq, "window length instead of the phase's seq_len")
      ->check(PositiveInt());
  eval->add_option("--rope-theta", a->rope_theta, "RoPE base instead of the phase's")
      ->check(Positive());
  eval->add_option("--windows", a->windows, "validation windows per data source (at most)")
      ->check(PositiveInt())
      ->capture_default_str();
  eval->add_option("--micro-batch", a->micro_batch, "windows per forward")
      ->check(PositiveInt())
      ->capture_default_str();
  eval->add_option("--context-parallel", a->context_parallel,
                   "spread each window over this many ranks (must divide the ranks)")
      ->check(PositiveInt())
      ->capture_default_str();
  add_task_options(*eval, a->tasks);

  return [=]() -> int {
    if (!*eval) return kNotMine;
    if (!a->tasks.files.empty()) {
      a->tasks.model = a->model;
      return run_task_eval(a->tasks);
    }
    ZAYA_CHECK(!a->config.empty(), "zaya eval needs --config (the validation loss) or --tasks");
    const nlohmann::json root = read_config_file(a->config);
    ZAYA_CHECK(root.contains("data"), a->config, ": missing section 'data' (zaya eval reads it)");
    const DataConfig dc = data_config_from_json(root["data"], a->config);
    const DataPhase* phase = &dc.phases.back();
    if (!a->phase.empty()) {
      phase = nullptr;
      for (const DataPhase& p : dc.phases)
        if (p.name == a->phase) phase = &p;
      ZAYA_CHECK(phase != nullptr, "--phase ", a->phase, ": ", a->config,
                 " has no data phase of that name");
    }
    const int seq = a->seq > 0 ? a->seq : int(phase->seq_len);
    const double theta = a->rope_theta > 0 ? a->rope_theta : phase->rope_theta;

    const std::unique_ptr<dist::Communicator> comm = dist::make_communicator();
    const int world = comm->world_size(), cp = a->context_parallel;
    const dist::RankGrid grid = dist::make_rank_grid(*comm, cp, "", "--context-parallel");
    ZAYA_CHECK(seq >= ContextShard::min_seq_len(cp), "--context-parallel ", cp, ": windows of ",
               seq, " tokens are too short; they must be >= ", ContextShard::min_seq_len(cp));

    LoadedModel m = load_model_any(a->model);
    for (const std::string& w : m.warnings) std::fprintf(stderr, "zaya: warning: %s\n", w.c_str());
    ZayaModel& model = *m.model;
    ZAYA_CHECK(seq <= model.config().max_seq_len, "windows of ", seq,
               " tokens exceed the model's max_seq_len ", model.config().max_seq_len);
    model.set_rope_theta(theta);
    model.set_context_group(grid.context_comm.get());
    const DataLoader loader(dc, 1);
    const EvalResult r = evaluate(model, loader, seq, a->windows, a->micro_batch,
                                  cp > 1 ? grid.data_comm.get() : comm.get());
    const nlohmann::json out = {{"model", m.path},     {"seq_len", seq},
                                {"rope_theta", theta}, {"val_loss", r.loss},
                                {"tokens", r.tokens},  {"unigram_val_loss", r.unigram},
                                {"ranks", world},      {"context_parallel", cp}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  };
}

}  // namespace zaya::cli
