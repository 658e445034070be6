#include "data/prepare.h"

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "data/checksum.h"
#include "data/document_sink.h"
#include "data/kill_point.h"
#include "data/prepare_pipeline.h"
#include "data/prepare_plan.h"
#include "data/progress_meter.h"
#include "data/shard.h"
#include "dist/communicator.h"
#include "io/input_files.h"
#include "io/output_path.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

json shards_json(const std::vector<ShardInfo>& shards) {
  json a = json::array();
  for (const auto& s : shards)
    a.push_back({{"file", s.path}, {"tokens", s.tokens}, {"checksum", checksum_hex(s.checksum)}});
  return a;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_json_atomic(const fs::path& path, const json& j, const char* point = "") {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    ZAYA_CHECK(out.good(), tmp.string(), ": cannot create file");
    out << j.dump(2) << "\n";
    ZAYA_CHECK(out.good(), tmp.string(), ": write failed");
  }
  kill_point(point);
  fs::rename(tmp, path);
}

// Token vectors are allocated by the worker threads and freed by this one; glibc keeps such freed
// pages in the workers' arenas, and over a long run the resident set crept up (50 MB after 300 MB
// of input, 59 MB after 3 GB). Handing free pages back now and then keeps the peak flat.
void release_free_memory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void check_options(const PrepareOptions& o, const TextEncoder& encoder) {
  ZAYA_CHECK(!o.inputs.empty(), "--input: at least one input file is required");
  ZAYA_CHECK(
      !o.name.empty() && o.name.find('/') == std::string::npos && o.name != "." && o.name != "..",
      "--name '", o.name, "': expected a plain source name such as 'brown'");
  ZAYA_CHECK(o.val_fraction >= 0 && o.val_fraction < 1, "--val-fraction ", o.val_fraction,
             ": expected a value in [0, 1)");
  ZAYA_CHECK(o.shard_tokens > 0, "--shard-tokens ", o.shard_tokens, ": expected a positive count");
  ZAYA_CHECK(o.threads >= 1, "--threads ", o.threads, ": expected at least 1");
  ZAYA_CHECK(o.min_chars >= 0, "--min-chars ", o.min_chars, ": expected a count >= 0");
  ZAYA_CHECK(!o.doc_separator.empty(), "--doc-separator must not be empty");
  ZAYA_CHECK(!o.text_key.empty(), "--text-key must not be empty");
  const int64_t vocab = encoder.vocab_size();
  const int32_t eos = encoder.eos_id();
  ZAYA_CHECK(eos >= 0 && eos < vocab, "tokenizer '", o.tokenizer, "': eos id ", eos,
             " is outside its vocabulary of ", vocab);
}

PipelineConfig pipeline_config(const PrepareOptions& o, const std::vector<std::string>& files) {
  PipelineConfig c;
  c.files = files;
  c.read = {.format = o.format,
            .doc_separator = o.doc_separator,
            .text_key = o.text_key,
            .id_key = o.id_key,
            .max_record_bytes = o.max_record_bytes,
            .stream = {.max_ratio = o.max_decompression_ratio}};
  c.threads = o.threads;
  c.hash_texts = o.dedup_exact;
  c.min_chars = o.min_chars;
  c.keep_going = o.skip_bad;
  return c;
}

int64_t total_file_bytes(const std::vector<std::string>& files) {
  int64_t total = 0;
  std::error_code ec;
  for (const auto& f : files) total += int64_t(fs::file_size(f, ec));
  return total;
}

void print_file_line(const PrepareOptions& o, const FileReport& f) {
  std::fprintf(stderr, "prepare %s: %s: %lld bytes, %lld documents, %lld tokens\n", o.name.c_str(),
               f.path.c_str(), static_cast<long long>(f.content_bytes),
               static_cast<long long>(f.documents), static_cast<long long>(f.tokens));
}

json index_json(const PrepareOptions& o, const std::vector<std::string>& files,
                const DocumentSink& sink, const PrepareSummary& sum, const TextEncoder& encoder) {
  const int64_t vocab = encoder.vocab_size();
  json made_by = {{"command", "zaya data prepare"},
                  {"inputs", files},
                  {"input_bytes", sum.input_bytes},
                  {"doc_separator", o.doc_separator},
                  {"val_fraction", o.val_fraction},
                  {"split_seed", o.seed},
                  {"shard_tokens", o.shard_tokens},
                  {"created_utc", utc_now()},
                  {"elapsed_s", sum.elapsed_s},
                  {"format", input_format_name(o.format)},
                  {"text_key", o.text_key},
                  {"id_key", o.id_key},
                  {"dedup", o.dedup_exact ? "exact" : "none"},
                  {"min_chars", o.min_chars},
                  {"skip_bad", o.skip_bad}};
  json index = {
      {"format", "ZAYATOK1"},
      {"version", kShardVersion},
      {"source", o.name},
      {"dtype", token_dtype_name(token_dtype_for_vocab(vocab))},
      {"checksum", "fnv1a64"},
      {"tokenizer", {{"path", o.tokenizer}, {"vocab_size", vocab}, {"eos_id", encoder.eos_id()}}},
      {"documents", sum.documents},
      {"train",
       {{"documents", sum.train_documents},
        {"tokens", sum.train_tokens},
        {"shards", shards_json(sink.train().shards())}}},
      {"val",
       {{"documents", sum.val_documents},
        {"tokens", sum.val_tokens},
        {"shards", shards_json(sink.val().shards())}}},
      {"made_by", std::move(made_by)},
      {"report", sink.report().to_json()}};
  if (!o.id_key.empty()) index["documents_file"] = "documents.jsonl";
  return index;
}

}  // namespace

std::vector<std::string_view> split_documents(std::string_view text, std::string_view separator) {
  ZAYA_CHECK(!separator.empty(), "--doc-separator must not be empty");
  std::vector<std::string_view> docs;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view doc = trim(text.substr(start, end - start));
    if (!doc.empty()) docs.push_back(doc);
    start = end + separator.size();
  }
  return docs;
}

bool is_validation_document(uint64_t seed, int64_t doc_index, double val_fraction) {
  // 53 random bits -> a double in [0, 1); the stream name keeps this split independent of every
  // other use of the same seed.
  const auto w = Philox(seed, hash_name("zaya.data.val_split")).words(uint64_t(doc_index));
  const double u = double(((uint64_t(w[0]) << 32) | w[1]) >> 11) * 0x1.0p-53;
  return u < val_fraction;
}

namespace {

// Runs `work` where `mine` holds, then tells every rank whether any rank failed: the failing
// rank rethrows its own error, the others a pointer to it. No rank is left waiting.
template <typename Work>
void on_every_rank(dist::Communicator* comm, bool mine, Work&& work) {
  if (comm == nullptr || comm->world_size() == 1) {
    if (mine) work();
    return;
  }
  std::exception_ptr error;
  try {
    if (mine) work();
  } catch (...) {
    error = std::current_exception();
  }
  int32_t failed = error ? 1 : 0;
  comm->all_reduce(&failed, &failed, 1, DType::I32, dist::ReduceOp::Max);
  if (error) std::rethrow_exception(error);
  ZAYA_CHECK(failed == 0, "data prepare: another rank failed (its message names the cause)");
}

// Rank 0, before any part is written: a fresh run starts from an empty work directory; --resume
// keeps the parts of the same plan. True when --resume finds the source already complete.
bool set_up_work_dir(const PrepareOptions& o, const fs::path& dir, const fs::path& work,
                     const json& plan) {
  if (o.resume && fs::exists(dir / "index.json")) {
    fs::remove_all(work);
    return true;
  }
  const fs::path plan_path = work / "plan.json";
  const bool resumable = o.resume && fs::exists(plan_path);
  // A fresh run replaces DIR/NAME: once, a prepare of other input turned a source of 200
  // documents into one of 50 without a word. The same plan resumed is this run's own, and an
  // unfinished prepare (its work directory, no index.json) is started over as it always was.
  if (!resumable) {
    const bool unfinished = fs::exists(work) && !fs::exists(dir / "index.json");
    OutputRule rule{"--out/--name", dir.string(), OutputKind::kDirectory, o.force || unfinished,
                    o.inputs};
    if (o.tokenizer != "bytes") rule.inputs.push_back(o.tokenizer);
    check_output(rule);
  }
  fs::create_directories(dir);
  if (resumable) {
    std::ifstream in(plan_path);
    const std::string diff = plan_difference(json::parse(in, nullptr, false), plan);
    ZAYA_CHECK(diff.empty(), "--resume: ", work.string(), " was made for other inputs or options (",
               diff, "); run without --resume to start over");
    for (const auto& e : fs::directory_iterator(work))
      if (e.path().extension() == ".tmp") fs::remove(e.path());
    return false;
  }
  if (o.resume && o.progress)
    std::fprintf(stderr, "prepare %s: nothing to resume in %s; starting from the beginning\n",
                 o.name.c_str(), work.c_str());
  // A stale index.json would describe shards we are about to overwrite: remove it first, write
  // the new one last.
  fs::remove(dir / "index.json");
  fs::remove_all(work);
  fs::create_directories(work);
  write_json_atomic(plan_path, plan);
  return false;
}

// Called with each batch after its part has taken it: the batch's global file index and the part
// sink (whose last_file() is the file's report once a batch is file_done).
using BatchHook = std::function<void(int file, Batch& batch, const PartSink& parts)>;

// Tokenizes input files `mine` (global indices into `files`) into their parts.
void tokenize_files(const PrepareOptions& o, const TextEncoder& encoder,
                    const std::vector<std::string>& files, const std::vector<int>& mine,
                    const std::string& work, const BatchHook& hook = {}) {
  if (mine.empty()) return;
  std::vector<std::string> paths;
  for (int i : mine) paths.push_back(files[size_t(i)]);
  ProgressMeter meter("prepare " + o.name, total_file_bytes(paths), o.progress);
  PartSink sink(o, work, paths, mine, encoder.vocab_size());
  OrderedPipeline pipeline(pipeline_config(o, paths), encoder);
  Batch batch;
  for (int64_t taken = 1; pipeline.next(batch); ++taken) {
    sink.take(batch);
    if (hook) hook(mine[size_t(batch.file)], batch, sink);
    if (taken % 64 == 0) release_free_memory();
    meter.update(sink.file_bytes_done() + (batch.file_done ? 0 : batch.file_bytes),
                 sink.content_bytes_done() + (batch.file_done ? 0 : batch.content_bytes),
                 sink.documents(), sink.tokens());
    if (batch.file_done && o.progress && !meter.active()) print_file_line(o, sink.last_file());
  }
  meter.finish();
}

// Shards and documents.jsonl of an earlier, interrupted assembly (they are all written again).
void remove_old_outputs(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool shard = (name.starts_with("train-") || name.starts_with("val-")) &&
                       (name.ends_with(".bin") || name.ends_with(".bin.tmp"));
    if (shard || name.starts_with("documents.jsonl")) fs::remove(e.path());
  }
}

// After every document went into `sink`: the last shards, the summary and index.json.
PrepareSummary finish_assembly(const PrepareOptions& o, const TextEncoder& encoder,
                               const std::vector<std::string>& files, DocumentSink& sink,
                               const fs::path& dir, const fs::path& work,
                               std::chrono::steady_clock::time_point t0) {
  ZAYA_CHECK(sink.train_documents() > 0, "--input: no training documents (", sink.documents(),
             " documents found with separator ", json(o.doc_separator).dump(),
             "); expected non-empty text");
  sink.finish();
  if (o.progress && o.val_fraction > 0 && sink.val_documents() == 0)
    std::fprintf(stderr, "warning: no document was held out for validation (%lld documents)\n",
                 static_cast<long long>(sink.documents()));
  PrepareSummary sum;
  sum.source_dir = dir.string();
  sum.documents = sink.documents();
  sum.train_documents = sink.train_documents();
  sum.val_documents = sink.val_documents();
  sum.input_bytes = sink.report().total().content_bytes;
  sum.train_tokens = sink.train().tokens();
  sum.val_tokens = sink.val().tokens();
  sum.train_shards = int64_t(sink.train().shards().size());
  sum.val_shards = int64_t(sink.val().shards().size());
  sum.dropped = sink.report().dropped_summary();
  sum.elapsed_s = seconds_since(t0);
  write_json_atomic(dir / "index.json", index_json(o, files, sink, sum, encoder), "index-commit");
  kill_point("cleanup");
  fs::remove_all(work);
  return sum;
}

// Rank 0, once every part exists: the parts in input order into shards, then index.json.
PrepareSummary assemble(const PrepareOptions& o, const TextEncoder& encoder,
                        const std::vector<std::string>& files, const fs::path& dir,
                        const fs::path& work, std::chrono::steady_clock::time_point t0) {
  remove_old_outputs(dir);
  DocumentSink sink(o, dir.string(), files, encoder.vocab_size(), encoder.eos_id(), o.progress);
  for (int i = 0; i < int(files.size()); ++i) {
    PartReader part(part_path(work.string(), i));
    sink.take(i, part);
  }
  return finish_assembly(o, encoder, files, sink, dir, work, t0);
}

// One rank: the shards are written beside the tokenization, each batch going into the shards as
// its part takes it (the files `pending` lacks, whose parts an interrupted run finished, are
// read back in their turn), instead of reading every part back afterwards. The same documents
// reach the sink in the same order, so the outputs are those of assemble().
PrepareSummary tokenize_and_assemble(const PrepareOptions& o, const TextEncoder& encoder,
                                     const std::vector<std::string>& files,
                                     const std::vector<int>& pending, const fs::path& dir,
                                     const fs::path& work,
                                     std::chrono::steady_clock::time_point t0) {
  remove_old_outputs(dir);
  // Shard lines would break a progress line redrawn in place; logs get them.
  DocumentSink sink(o, dir.string(), files, encoder.vocab_size(), encoder.eos_id(),
                    o.progress && !::isatty(STDERR_FILENO));
  int next = 0;  // the next file the sink takes
  const auto take_parts_until = [&](int end) {
    for (; next < end; ++next) {
      PartReader part(part_path(work.string(), next));
      sink.take(next, part);
    }
  };
  tokenize_files(o, encoder, files, pending, work.string(),
                 [&](int file, Batch& batch, const PartSink& parts) {
                   take_parts_until(file);
                   sink.take(file, batch);
                   if (!batch.file_done) return;
                   sink.end_file(file, parts.last_file());
                   next = file + 1;
                 });
  take_parts_until(int(files.size()));
  return finish_assembly(o, encoder, files, sink, dir, work, t0);
}

// The summary of a source that is already complete, from its index.json.
PrepareSummary summary_of(const fs::path& dir) {
  std::ifstream in(dir / "index.json");
  const json index = json::parse(in);
  PrepareSummary sum;
  sum.source_dir = dir.string();
  sum.documents = index.at("documents").get<int64_t>();
  sum.train_documents = index.at("train").at("documents").get<int64_t>();
  sum.val_documents = index.at("val").at("documents").get<int64_t>();
  sum.train_tokens = index.at("train").at("tokens").get<int64_t>();
  sum.val_tokens = index.at("val").at("tokens").get<int64_t>();
  sum.train_shards = int64_t(index.at("train").at("shards").size());
  sum.val_shards = int64_t(index.at("val").at("shards").size());
  sum.input_bytes = index.at("report").at("content_bytes").get<int64_t>();
  sum.dropped = "  already complete: nothing to resume\n";
  return sum;
}

}  // namespace

PrepareSummary prepare_source(const PrepareOptions& options, const TextEncoder& encoder,
                              dist::Communicator* comm) {
  const auto t0 = std::chrono::steady_clock::now();
  check_options(options, encoder);
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->world_size() : 1;
  PrepareOptions o = options;
  o.progress = options.progress && rank == 0;
  const std::vector<std::string> files = expand_input_paths(o.inputs);
  const fs::path dir = fs::path(o.out_dir) / o.name, work = dir / ".prepare";

  int32_t complete = 0;
  on_every_rank(comm, rank == 0, [&] {
    complete = set_up_work_dir(o, dir, work, parts_plan(o, files, encoder)) ? 1 : 0;
  });
  if (world > 1) comm->broadcast(&complete, &complete, 1, DType::I32, 0);
  if (complete != 0) return summary_of(dir);

  std::vector<int64_t> sizes;
  std::error_code ec;
  for (const auto& f : files) sizes.push_back(int64_t(fs::file_size(f, ec)));
  std::vector<int> pending;
  for (int i : files_of_rank(sizes, rank, world))
    if (!part_is_complete(part_path(work.string(), i))) pending.push_back(i);
  if (o.resume && o.progress && world == 1)
    std::fprintf(stderr, "prepare %s: resuming: %zu of %zu input files already tokenized\n",
                 o.name.c_str(), files.size() - pending.size(), files.size());
  PrepareSummary sum;
  if (world == 1) {
    sum = tokenize_and_assemble(o, encoder, files, pending, dir, work, t0);
    sum.source_dir = dir.string();
    return sum;
  }
  on_every_rank(comm, true, [&] { tokenize_files(o, encoder, files, pending, work.string()); });

  on_every_rank(comm, rank == 0, [&] { sum = assemble(o, encoder, files, dir, work, t0); });
  sum.source_dir = dir.string();
  return sum;
}

}  // namespace zaya
