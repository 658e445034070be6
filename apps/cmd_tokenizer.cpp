#include "cmd_tokenizer.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/error.h"
#include "input_limit_flags.h"
#include "io/byte_stream.h"
#include "io/document_reader.h"
#include "io/input_files.h"
#include "io/output_path.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/tokenizer_files.h"

namespace zaya::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::string read_input(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  ZAYA_CHECK(in, flag, ": cannot open '", path, "' for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int32_t> parse_ids(const std::string& list) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos < list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, comma - pos);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    ZAYA_CHECK(!item.empty() && *end == '\0' && v >= 0 && v <= INT32_MAX, "--ids: '", item,
               "' is not a token id (expected e.g. --ids 15496,995)");
    ids.push_back(int32_t(v));
    pos = comma + 1;
  }
  return ids;
}

struct TokenizerTrainArgs {
  std::vector<std::string> inputs;
  std::string out;
  ReadOptions read;  // text_key and the limits
  bool force = false;
  BpeTrainOptions options;
};

// A text file whole, as training takes it, refused once it passes the --max-record-bytes limit
// (it is one document here), before the rest is read.
std::string read_whole_text(const std::string& path, const ReadOptions& options) {
  const auto stream = open_byte_stream(path, nullptr, options.stream);
  std::string text, chunk(size_t(1) << 20, '\0');
  while (const size_t n = stream->read(chunk)) {
    text.append(chunk, 0, n);
    ZAYA_CHECK(int64_t(text.size()) <= options.max_record_bytes, path,
               ": a text file is one document for tokenizer training, and this one is longer "
               "than the limit of ",
               options.max_record_bytes, " bytes (at least ", text.size(),
               " bytes); raise --max-record-bytes to read it");
  }
  return text;
}

// Calls `use` with the training text of each input, the same inputs `zaya data prepare` reads: a
// JSON Lines file (plain, .gz or .zst) one document at a time, a text file whole (decompressed),
// as training always took text files (so their word counts, and the tokenizer, are unchanged).
// Returns the bytes of text seen.
size_t for_each_text(const std::vector<std::string>& files, const ReadOptions& options,
                     const std::function<void(std::string_view)>& use) {
  size_t bytes = 0;
  for (const std::string& path : files) {
    DocumentReader reader(path, options);
    if (reader.records().format() == InputFormat::kJsonl) {
      Document doc;
      while (reader.next(doc)) {
        bytes += doc.text.size();
        use(doc.text);
      }
      continue;
    }
    const std::string text = read_whole_text(path, options);
    bytes += text.size();
    use(text);
  }
  return bytes;
}

int run_train(const TokenizerTrainArgs& a) {
  const auto t0 = Clock::now();
  const std::vector<std::string> files = expand_input_paths(a.inputs);
  // Checked before the training, so a refused --out costs nothing.
  StagedOutput out({"--out", a.out, OutputKind::kFile, a.force, files});
  WordCounts counts;
  const size_t bytes =
      for_each_text(files, a.read, [&](std::string_view text) { count_words(text, counts); });
  std::fprintf(stderr, "tokenizer train: %zu file(s), %.2f MB, %zu distinct words (%.1f s)\n",
               files.size(), bytes / 1e6, counts.size(), seconds_since(t0));
  // A tokenizer of the 256 bytes alone, from no text, would be written without a word.
  ZAYA_CHECK(!counts.empty(), "--input: no text to train on (", bytes, " bytes in ", files.size(),
             " file(s)); a tokenizer learns its merges from text");
  BpeTrainOptions options = a.options;
  options.progress = [&](int32_t done, int32_t wanted) {
    std::fprintf(stderr, "\r  merges %d/%d (%.1f s)", done, wanted, seconds_since(t0));
    if (done == wanted) std::fprintf(stderr, "\n");
  };
  const BpeTokenizer tok = train_bpe(counts, options);
  const double train_s = seconds_since(t0);
  save_hf_tokenizer_json(tok, out.path());
  out.commit();
  size_t tokens = 0;
  for_each_text(files, a.read, [&](std::string_view text) { tokens += tok.encode(text).size(); });
  std::printf(
      "tokenizer train: vocab %d (256 bytes + %d merges + %zu special), %.1f s, %.3f bytes/token "
      "on the training text; wrote %s\n",
      tok.vocab_size(), tok.merge_count(), tok.model().special_ids.size(), train_s,
      tokens ? double(bytes) / double(tokens) : 0.0, a.out.c_str());
  return 0;
}

struct EncodeArgs {
  std::string tokenizer, text, input;
  bool json = false, special = false, bos = false, stats = false;
};

int run_encode(const EncodeArgs& a) {
  const auto tok = load_tokenizer(a.tokenizer);
  const std::string text = a.input.empty() ? a.text : read_input(a.input, "--input");
  EncodeOptions options;
  options.specials = a.special ? SpecialTokens::kRecognise : SpecialTokens::kAsText;
  options.add_bos = a.bos;
  const auto t0 = Clock::now();
  const std::vector<int32_t> ids = tok->encode(text, options);
  const double s = seconds_since(t0);
  if (a.stats) {
    // FNV-1a over the ids lets a benchmark check that another encoder gave the very same ids.
    uint32_t checksum = 2166136261u;
    for (const int32_t id : ids) checksum = (checksum ^ uint32_t(id)) * 16777619u;
    std::printf(
        "zaya: %zu bytes -> %zu tokens in %.3f s: %.0f tokens/s, %.2f MB/s, ids fnv1a %08x\n",
        text.size(), ids.size(), s, double(ids.size()) / s, double(text.size()) / s / 1e6,
        checksum);
  } else if (a.json) {
    std::printf("%s\n", nlohmann::json(ids).dump().c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

int run_decode(const std::string& tokenizer, const std::string& ids) {
  const auto tok = load_tokenizer(tokenizer);
  const std::string text = tok->decode(parse_ids(ids));
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::printf("\n");
  return 0;
}

}  // namespace

Runner add_tokenizer_commands(CLI::App& app) {
  auto* tok = app.add_subcommand(
      "tokenizer",
      "BPE tokenizers (byte-level, or SentencePiece-style as Gemma-3): train, encode, "
      "decode");
  tok->require_subcommand(1);
  const char* tok_help =
      "tokenizer.json (byte-level BPE, or SentencePiece-style BPE with byte fallback as Gemma-3), "
      "or a directory holding tokenizer.json or GPT-2's encoder.json + vocab.bpe";

  auto train_args = std::make_shared<TokenizerTrainArgs>();
  auto* train = tok->add_subcommand("train", "Train a byte-level BPE tokenizer on text files");
  train
      ->add_option("--input", train_args->inputs,
                   "training inputs, as zaya data prepare reads them: text or JSON Lines files "
                   "(plain, .gz, .zst), directories, quoted globs")
      ->required();
  train
      ->add_option("--text-key", train_args->read.text_key,
                   "JSON Lines: the field holding the text (a dotted path reaches into objects)")
      ->capture_default_str();
  train
      ->add_option("--vocab-size", train_args->options.vocab_size,
                   "tokens in all: 256 bytes + merges + <|endoftext|>")
      ->capture_default_str()
      ->check(IntIn(257, 1 << 24));
  train
      ->add_option("--min-pair-count", train_args->options.min_pair_count,
                   "never merge a pair seen fewer times")
      ->capture_default_str()
      ->check(PositiveInt<int64_t>());
  add_max_record_bytes_flag(*train, train_args->read.max_record_bytes,
                            "JSON line, or text file (read whole)");
  add_max_decompression_ratio_flag(*train, train_args->read.stream.max_ratio);
  train->add_option("--out", train_args->out, "output tokenizer.json")
      ->required()
      ->check(OutputFile());
  train->add_flag("--force", train_args->force, "replace an existing --out file");

  auto enc = std::make_shared<EncodeArgs>();
  auto* encode = tok->add_subcommand("encode", "Print the token ids of a text");
  encode->add_option("--tokenizer", enc->tokenizer, tok_help)->required();
  auto* text_opt = encode->add_option("--text", enc->text, "text to encode");
  auto* input_opt = encode->add_option("--input", enc->input, "file to encode (any bytes)")
                        ->check(ExistingFile());
  text_opt->excludes(input_opt);
  encode->add_flag("--json", enc->json, "print a JSON array instead of comma-separated ids");
  encode->add_flag(
      "--special", enc->special,
      "turn special-token text such as <|endoftext|> or <eos> into its id (default: plain text)");
  encode->add_flag("--bos", enc->bos,
                   "put the beginning-of-sequence token first (Gemma's <bos>; with --special this "
                   "is the default encoding of Hugging Face and transformers.js)");
  encode->add_flag("--stats", enc->stats,
                   "print token count, encoding speed and a checksum of the ids, not the ids");

  auto dec_tokenizer = std::make_shared<std::string>();
  auto dec_ids = std::make_shared<std::string>();
  auto* decode = tok->add_subcommand("decode", "Print the text of token ids");
  decode->add_option("--tokenizer", *dec_tokenizer, tok_help)->required();
  decode->add_option("--ids", *dec_ids, "comma-separated token ids, e.g. 15496,995")->required();

  return [=]() -> int {
    if (*train) return run_train(*train_args);
    if (*encode) {
      ZAYA_CHECK(!enc->text.empty() || !enc->input.empty() || text_opt->count() > 0,
                 "tokenizer encode: give --text STR or --input FILE");
      return run_encode(*enc);
    }
    if (*decode) return run_decode(*dec_tokenizer, *dec_ids);
    return kNotMine;
  };
}

}  // namespace zaya::cli
