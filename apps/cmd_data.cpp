// `zaya data prepare`: argument parsing and the summary; the work is zaya::prepare_source.
#include "cmd_data.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "data/prepare.h"
#include "data/text_encoder.h"

namespace zaya::cli {

namespace {

struct PrepareArgs {
  PrepareOptions options;
  std::string tokenizer = "bytes";
};

}  // namespace

Runner add_data_commands(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Prepare training data (token shards)");
  data->require_subcommand(1);
  auto* prepare = data->add_subcommand(
      "prepare",
      "Split text files into documents, tokenize, hold out whole documents for validation and "
      "write DIR/NAME/{train,val}-NNNNN.bin + index.json (format: docs/data-format.md)");
  auto args = std::make_shared<PrepareArgs>();
  PrepareOptions& o = args->options;
  prepare->add_option("--input", o.inputs, "text file(s), read in order")
      ->required()
      ->check(CLI::ExistingFile);
  prepare->add_option("--out", o.out_dir, "output directory (the source goes to DIR/NAME)")
      ->required();
  prepare->add_option("--name", o.name, "source name, e.g. brown")->required();
  prepare->add_option("--val-fraction", o.val_fraction, "share of documents held out")
      ->capture_default_str();
  prepare->add_option("--shard-tokens", o.shard_tokens, "tokens per shard")->capture_default_str();
  prepare->add_option("--doc-separator", o.doc_separator,
                      "string between documents (escapes \\n and \\t are understood; default: a "
                      "blank line)");
  prepare
      ->add_option("--tokenizer", args->tokenizer,
                   "a tokenizer.json (zaya tokenizer train, GPT-2, Gemma-3), a directory with "
                   "GPT-2's encoder.json + vocab.bpe, or 'bytes' (byte-level, vocab 257)")
      ->capture_default_str();
  prepare->add_option("--seed", o.seed, "seed of the train/val split")->capture_default_str();
  prepare->add_flag("!--no-progress", o.progress, "no progress lines on stderr");

  return [prepare, args]() -> int {
    if (!*prepare) return kNotMine;
    PrepareOptions& o = args->options;
    // Shells make it awkward to pass a newline: accept the escapes \n and \t.
    std::string sep;
    for (size_t i = 0; i < o.doc_separator.size(); ++i) {
      if (o.doc_separator[i] == '\\' && i + 1 < o.doc_separator.size() &&
          (o.doc_separator[i + 1] == 'n' || o.doc_separator[i + 1] == 't')) {
        sep += o.doc_separator[++i] == 'n' ? '\n' : '\t';
      } else {
        sep += o.doc_separator[i];
      }
    }
    o.doc_separator = sep;
    o.tokenizer = args->tokenizer;
    const auto encoder = make_text_encoder(args->tokenizer);
    const PrepareSummary s = prepare_source(o, *encoder);
    std::printf(
        "prepared %s: %lld documents (%lld train, %lld val) from %lld bytes\n"
        "  train: %lld tokens in %lld shard(s)\n"
        "  val:   %lld tokens in %lld shard(s) (%.2f%% of tokens)\n"
        "  index: %s/index.json, elapsed %.2f s\n",
        o.name.c_str(), (long long)s.documents, (long long)s.train_documents,
        (long long)s.val_documents, (long long)s.input_bytes, (long long)s.train_tokens,
        (long long)s.train_shards, (long long)s.val_tokens, (long long)s.val_shards,
        100.0 * double(s.val_tokens) / double(std::max<int64_t>(1, s.train_tokens + s.val_tokens)),
        s.source_dir.c_str(), s.elapsed_s);
    return 0;
  };
}

}  // namespace zaya::cli
