// `zaya data prepare`: argument parsing and the summary; the work is zaya::prepare_source.
#include "cmd_data.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/prepare.h"
#include "data/text_encoder.h"
#include "dist/communicator.h"
#include "input_limit_flags.h"

namespace zaya::cli {

namespace {

struct PrepareArgs {
  PrepareOptions options;
  std::string tokenizer = "bytes";
  std::string dedup = "none";
  std::string format = "auto";
  int threads = 0;  // 0: one per core
};

// Shells make it awkward to pass a newline: accept the escapes \n and \t.
std::string unescape_separator(const std::string& s) {
  std::string sep;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't')) {
      sep += s[++i] == 'n' ? '\n' : '\t';
    } else {
      sep += s[i];
    }
  }
  return sep;
}

void add_input_options(CLI::App* prepare, PrepareArgs& args) {
  PrepareOptions& o = args.options;
  prepare
      ->add_option("--input", o.inputs,
                   "input files, directories (every .txt/.md/.jsonl/.json/.ndjson/.gz/.zst file "
                   "below, in path order) or quoted glob patterns; read in order. gzip and zstd "
                   "are recognised by their first bytes, JSON Lines by the name or a leading '{'")
      ->required();
  prepare
      ->add_option("--format", args.format,
                   "auto (by name, else by content), text (documents split at --doc-separator) or "
                   "jsonl (one JSON object per line)")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}))
      ->capture_default_str();
  prepare->add_option(
      "--doc-separator", o.doc_separator,
      "text inputs: the string between documents (escapes \\n and \\t are "
      "understood; default: a blank line); documents are trimmed, empty ones dropped");
  prepare
      ->add_option("--text-key", o.text_key,
                   "JSON Lines: the field holding the text; a dotted path reaches into objects "
                   "(meta.body)")
      ->capture_default_str();
  prepare->add_option("--id-key", o.id_key,
                      "JSON Lines: a field (string or number) identifying each document; kept, "
                      "with its split and token offset, in DIR/NAME/documents.jsonl");
  add_max_record_bytes_flag(*prepare, o.max_record_bytes, "line (JSON Lines) or document (text)");
  add_max_decompression_ratio_flag(*prepare, o.max_decompression_ratio);
}

void add_cleaning_options(CLI::App* prepare, PrepareArgs& args) {
  PrepareOptions& o = args.options;
  prepare
      ->add_option("--dedup", args.dedup,
                   "none, or exact: drop a document whose text (by a 128-bit hash) was seen "
                   "before; costs about 50 bytes of memory per distinct document")
      ->check(CLI::IsMember({"none", "exact"}))
      ->capture_default_str();
  prepare
      ->add_option("--min-chars", o.min_chars,
                   "drop documents with fewer characters (Unicode code points)")
      ->capture_default_str()
      ->check(NonNegativeInt<int64_t>());
  prepare->add_flag("--skip-bad", o.skip_bad,
                    "skip bad input (a line that is not JSON, a missing key, a non-string text, "
                    "invalid UTF-8, a NUL byte, the rest of a truncated or damaged .gz/.zst) and "
                    "count it by reason in index.json; without it the first one stops the run "
                    "with FILE:LINE and the reason");
}

void add_output_options(CLI::App* prepare, PrepareArgs& args) {
  PrepareOptions& o = args.options;
  prepare->add_option("--out", o.out_dir, "output directory (the source goes to DIR/NAME)")
      ->required()
      ->check(OutputDir());
  prepare->add_option("--name", o.name, "source name, e.g. brown")->required();
  prepare->add_option("--val-fraction", o.val_fraction, "share of documents held out")
      ->capture_default_str();
  prepare->add_option("--shard-tokens", o.shard_tokens, "tokens per shard")
      ->capture_default_str()
      ->check(PositiveInt<int64_t>());
  prepare
      ->add_option("--tokenizer", args.tokenizer,
                   "a tokenizer.json (zaya tokenizer train, GPT-2, Gemma-3), a directory with "
                   "GPT-2's encoder.json + vocab.bpe, or 'bytes' (byte-level, vocab 257)")
      ->capture_default_str();
  prepare->add_option("--seed", o.seed, "seed of the train/val split")
      ->capture_default_str()
      ->check(Seed());
  prepare
      ->add_option(
          "--threads", args.threads,
          "tokenizer threads (0: one per core). A reader thread decompresses ahead of them; "
          "with 1 the main thread tokenizes and writes, with more it only writes. The "
          "output is byte-identical at any count")
      ->capture_default_str()
      ->check(IntIn(0, 4096));
  prepare->add_flag("--force", o.force,
                    "replace an existing DIR/NAME (without it, a source already there is kept and "
                    "the run refused; --resume continues this run's own)");
  prepare->add_flag("--resume", o.resume,
                    "continue an interrupted run: input files already tokenized (their parts in "
                    "DIR/NAME/.prepare) are kept, the rest redone; the output is byte-identical "
                    "to an uninterrupted run's. Needs the same inputs, reading options and "
                    "tokenizer");
  prepare->add_flag("!--no-progress", o.progress,
                    "no progress on stderr (on a terminal: MB/s, documents/s, tokens/s, ETA)");
}

int run_prepare(PrepareArgs& args) {
  PrepareOptions& o = args.options;
  o.doc_separator = unescape_separator(o.doc_separator);
  o.tokenizer = args.tokenizer;
  o.dedup_exact = args.dedup == "exact";
  o.format = args.format == "text"    ? InputFormat::kText
             : args.format == "jsonl" ? InputFormat::kJsonl
                                      : InputFormat::kAuto;
  ZAYA_CHECK(args.threads >= 0, "--threads ", args.threads, ": expected 0 (one per core) or more");
  o.threads =
      args.threads > 0 ? args.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const auto encoder = make_text_encoder(args.tokenizer);
  const std::unique_ptr<dist::Communicator> comm = dist::make_communicator();
  const PrepareSummary s = prepare_source(o, *encoder, comm.get());
  if (comm->rank() != 0) return 0;  // rank 0 reports for all
  std::printf(
      "prepared %s: %lld documents (%lld train, %lld val) from %lld bytes\n"
      "  train: %lld tokens in %lld shard(s)\n"
      "  val:   %lld tokens in %lld shard(s) (%.2f%% of tokens)\n"
      "%s"
      "  index: %s/index.json, elapsed %.2f s\n",
      o.name.c_str(), (long long)s.documents, (long long)s.train_documents,
      (long long)s.val_documents, (long long)s.input_bytes, (long long)s.train_tokens,
      (long long)s.train_shards, (long long)s.val_tokens, (long long)s.val_shards,
      100.0 * double(s.val_tokens) / double(std::max<int64_t>(1, s.train_tokens + s.val_tokens)),
      s.dropped.c_str(), s.source_dir.c_str(), s.elapsed_s);
  return 0;
}

}  // namespace

Runner add_data_commands(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Prepare training data (token shards)");
  data->require_subcommand(1);
  auto* prepare = data->add_subcommand(
      "prepare",
      "Read text or JSON Lines files (plain, gzip or zstd), tokenize the documents on every core, "
      "hold out whole documents for validation and write DIR/NAME/{train,val}-NNNNN.bin + "
      "index.json (format: docs/data-format.md). Streams in bounded memory; the output depends "
      "only on the inputs and options, not on the thread or rank count. Under mpirun the "
      "input files are divided among the ranks. --resume continues an interrupted run");
  auto args = std::make_shared<PrepareArgs>();
  add_input_options(prepare, *args);
  add_cleaning_options(prepare, *args);
  add_output_options(prepare, *args);
  return [prepare, args]() -> int {
    if (!*prepare) return kNotMine;
    return run_prepare(*args);
  };
}

}  // namespace zaya::cli
