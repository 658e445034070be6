// zaya generate: text from a model with the CCA-cache decoder (infer/), streamed as it is drawn.
#include "cmd_generate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/device_select.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "infer/decoder.h"
#include "infer/engine.h"
#include "infer/generate.h"
#include "infer/text_stream.h"
#include "inference_model.h"
#include "input_limit_flags.h"
#include "io/input_files.h"
#include "io/json_limits.h"
#include "io/record_reader.h"
#include "serve/completion_request.h"

namespace zaya::cli {

namespace {

using nlohmann::json;

struct GenerateArgs {
  std::string model, tokenizer, prompt, prompts;
  std::string device = "auto";
  Precision precision = Precision::kFp32;
  std::vector<std::string> stop;
  // The request's numbers as given, read as JSON numbers by the request parser that zaya serve
  // uses (serve/completion_request.h), so that each means the same and is refused with the same
  // words; empty when not given.
  std::string max_tokens, temperature, top_k, top_p, repetition_penalty, seed;
  bool no_eos = false, json_out = false;
  int batch = 16;
  int64_t max_record_bytes = kDefaultMaxRecordBytes;  // the longest --prompts line
};

struct Request {
  json prompt;  // as given: a string, or token ids
  std::vector<int32_t> ids;
  GenerateOptions opt;
  std::vector<std::string> stop;
  std::string where;  // FILE:LINE of a --prompts request, for its errors
};

struct Outcome {
  std::string text, finish_reason;
  size_t prompt_tokens = 0, tokens = 0;
  double ttft_s = 0, decode_s = 0;
};

// One prompt through the one-sequence decoder, streamed.
Outcome run_one(Decoder& decoder, const Tokenizer& tok, const Request& rq, bool stream) {
  const std::vector<int32_t>& ids = rq.ids;
  TextStream text(tok, rq.stop, rq.opt.eos);
  const GenerateResult r = generate_tokens(decoder, ids, rq.opt, [&](int32_t t) {
    const std::string settled = text.push(t);
    if (stream && !settled.empty()) {
      std::fwrite(settled.data(), 1, settled.size(), stdout);
      std::fflush(stdout);
    }
    return !text.stopped();
  });
  const std::string rest = text.finish();
  if (stream) std::fwrite(rest.data(), 1, rest.size(), stdout);
  return Outcome{text.text(),     r.finish_reason,   ids.size(),
                 r.tokens.size(), r.prefill_seconds, r.decode_seconds};
}

json outcome_json(const Request& rq, const Outcome& o, const ModelConfig& c) {
  const double tps = o.tokens > 1 && o.decode_s > 0 ? double(o.tokens - 1) / o.decode_s : 0;
  return json{{"prompt", rq.prompt},
              {"text", o.text},
              {"finish_reason", o.finish_reason},
              {"prompt_tokens", o.prompt_tokens},
              {"tokens", o.tokens},
              {"time_to_first_token_ms", o.ttft_s * 1e3},
              {"tokens_per_s", tps},
              {"cache_bytes_per_token", BatchDecoder::cache_bytes_per_token(c)}};
}

void print_json_line(const json& j) {
  // Byte-level tokens can end a text inside a UTF-8 sequence: such bytes become U+FFFD.
  std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  std::fflush(stdout);
}

// Every request of a --prompts file through the continuous-batching engine, `batch` at a time;
// one JSON line per request, in the file's order, each printed as soon as it and those before
// it are done.
void run_batched(ZayaModel& model, const Tokenizer& tok, const std::vector<Request>& requests,
                 int batch, dist::Communicator* comm) {
  const ModelConfig& c = model.config();
  EngineLimits lim;
  lim.decoder.max_sequences = batch;
  lim.max_queue = requests.size();
  InferenceEngine engine(model, lim, comm);
  std::vector<Outcome> done(requests.size());
  std::vector<char> finished(requests.size(), 0);
  std::vector<std::unique_ptr<TextStream>> texts;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& rq = requests[i];
    EngineRequest er;
    er.prompt = rq.ids;
    er.opt = rq.opt;
    texts.push_back(std::make_unique<TextStream>(tok, rq.stop, rq.opt.eos));
    TextStream* text = texts.back().get();
    er.on_token = [text](int32_t t) {
      text->push(t);
      return !text->stopped();
    };
    const size_t prompt_tokens = er.prompt.size();
    er.on_done = [&, i, text, prompt_tokens](const EngineResult& r) {
      done[i] = Outcome{text->text(),    r.finish_reason, prompt_tokens,
                        r.tokens.size(), r.ttft_seconds,  r.decode_seconds};
      finished[i] = 1;
    };
    try {
      engine.submit(std::move(er));
    } catch (const Error& e) {
      throw Error(rq.where + ": " + e.what());
    }
  }
  size_t printed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (bool more = true; more;) {
    more = engine.tick();
    for (; printed < requests.size() && finished[printed]; ++printed)
      print_json_line(outcome_json(requests[printed], done[printed], c));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (comm && comm->rank() != 0) return;  // rank 0 reports for all
  std::fprintf(
      stderr,
      "[%zu requests, up to %d at once: %lld tokens decoded in batched steps at %.1f "
      "tokens/s, %.2f s in all]\n",
      requests.size(), batch, (long long)engine.decoded_tokens(),
      engine.decode_seconds() > 0 ? double(engine.decoded_tokens()) / engine.decode_seconds() : 0.0,
      wall);
}

// The command line's request fields as a JSON object, as a --prompts line or a request to zaya
// serve would hold them: each number read as JSON (a value that is not one stays a string, which
// the parser refuses by name).
json flag_fields(const GenerateArgs& a) {
  json j = json::object();
  const std::pair<const char*, const std::string*> numbers[] = {
      {"max_tokens", &a.max_tokens},
      {"temperature", &a.temperature},
      {"top_k", &a.top_k},
      {"top_p", &a.top_p},
      {"repetition_penalty", &a.repetition_penalty},
      {"seed", &a.seed}};
  for (const auto& [key, text] : numbers) {
    if (text->empty()) continue;
    if (json_too_deep(*text)) {  // kept as text: the parser refuses it by name
      j[key] = *text;
      continue;
    }
    try {
      j[key] = json::parse(*text);
    } catch (const json::exception&) {
      j[key] = *text;
    }
  }
  if (!a.stop.empty()) j["stop"] = a.stop;
  return j;
}

// A request through the parser of zaya serve; its errors name `where` (FILE:LINE), or for the
// command line the flag of the field.
serve::CompletionRequest parse_request(const json& j, const serve::RequestLimits& limits,
                                       const serve::CompletionRequest& base, bool prompt_required,
                                       const std::string& where) {
  try {
    serve::CompletionRequest r =
        serve::parse_request_object(j, limits, serve::Door::generate, base, prompt_required);
    if (prompt_required && r.prompts.size() != 1)
      throw serve::ApiError(400,
                            "'prompt': zaya generate takes one prompt per request, got " +
                                std::to_string(r.prompts.size()),
                            "prompt");
    return r;
  } catch (const serve::ApiError& e) {
    std::string flag = "--" + e.param;
    std::replace(flag.begin(), flag.end(), '_', '-');
    throw Error((where.empty() ? (e.param.empty() ? "the command line" : flag) : where) + ": " +
                e.what());
  }
}

// One parsed request, its prompt encoded and checked against the context.
Request make_request(const serve::CompletionRequest& cr, const Tokenizer& tok, int64_t context,
                     const std::string& where) {
  Request rq;
  const serve::PromptInput& p = cr.prompts.at(0);
  rq.prompt = p.is_tokens ? json(p.tokens) : json(p.text);
  try {
    rq.ids = serve::prompt_token_ids(tok, p, cr.max_tokens, context, "prompt");
  } catch (const serve::ApiError& e) {
    throw Error(where + ": " + e.what());
  }
  rq.opt.max_new_tokens = cr.max_tokens;
  rq.opt.sampling = cr.sampling;
  rq.opt.sampling.seed = cr.seed.value_or(0);
  rq.stop = cr.stop;
  rq.where = where;
  return rq;
}

std::vector<Request> read_prompts(const std::string& path, const serve::CompletionRequest& defaults,
                                  const serve::RequestLimits& limits, const Tokenizer& tok,
                                  int64_t context, int64_t max_record_bytes) {
  require_regular_file(path, "--prompts");
  // The reader of zaya data prepare: each line bounded while it is read.
  ReadOptions options;
  options.format = InputFormat::kJsonl;
  options.max_record_bytes = max_record_bytes;
  RecordReader lines(path, options);
  std::vector<Request> out;
  Record line;
  while (lines.next(line)) {
    const std::string where = path + ":" + std::to_string(line.line);
    check_json_depth(line.bytes, where);
    json j;
    try {
      j = json::parse(line.bytes);
    } catch (const json::exception& e) {
      throw Error(where + ": not JSON (" + e.what() + ")");
    }
    out.push_back(
        make_request(parse_request(j, limits, defaults, true, where), tok, context, where));
  }
  ZAYA_CHECK(!out.empty(), "--prompts: '", path, "' holds no prompt");
  return out;
}

}  // namespace

Runner add_generate_commands(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* gen = app.add_subcommand(
      "generate",
      "Generate text with the CCA-cache decoder: the prompt in one forward, then a token at a "
      "time; streams the text and reports time to first token, tokens/s and cache bytes");
  gen->add_option("--model", a->model,
                  "HF model directory, zaya checkpoint or a run's ckpt/ root (as zaya score)")
      ->required();
  gen->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json (default: the model directory's tokenizer.json)");
  gen->add_option("--device", a->device, kDeviceFlagHelp)->capture_default_str();
  add_mode_option(*gen, "--precision", a->precision, precision_names(), kInferencePrecisionHelp);
  gen->add_option("--prompt", a->prompt, "text to continue");
  gen->add_option("--prompts", a->prompts,
                  "JSON lines, one request each: {\"prompt\": ..., and optionally max_tokens, "
                  "temperature, top_k, top_p, repetition_penalty, seed, stop}; prints one JSON "
                  "line per request");
  // The request's numbers are read by the parser zaya serve uses (after the model is loaded: the
  // context bounds max_tokens), so each is checked and named as a request field would be.
  gen->add_option("--max-tokens", a->max_tokens,
                  "tokens to generate at most (default 64; prompt + max tokens must fit the "
                  "model's context)");
  gen->add_option("--temperature", a->temperature, "in [0, 2]; 0: greedy (default 0.8)");
  gen->add_option("--top-k", a->top_k, "sample among the k likeliest (0: all, the default)");
  gen->add_option("--top-p", a->top_p,
                  "in (0, 1]: sample among the likeliest tokens whose probability reaches p "
                  "(default 1)");
  gen->add_option("--repetition-penalty", a->repetition_penalty,
                  "in (0, 100]; > 1 discourages tokens already in the context (1: off, the "
                  "default)");
  gen->add_option("--seed", a->seed,
                  "sampling seed, an integer (default 0): the same prompt, settings and seed give "
                  "the same text");
  gen->add_option("--stop", a->stop, "stop when the text contains this string (repeatable)");
  gen->add_flag("--no-eos", a->no_eos, "do not stop at the tokenizer's end-of-text token");
  gen->add_flag("--json", a->json_out, "with --prompt: print one JSON line instead of streaming");
  gen->add_option("--batch", a->batch,
                  "with --prompts: requests decoded together (continuous batching: a finished "
                  "request's slot goes to the next); each request's text is the same at any batch")
      ->check(IntIn(1, 1024))
      ->capture_default_str();
  add_max_record_bytes_flag(*gen, a->max_record_bytes, "line of a --prompts file");

  return [=]() -> int {
    if (!*gen) return kNotMine;
    ZAYA_CHECK(a->prompt.empty() || a->prompts.empty(),
               "zaya generate takes --prompt TEXT or --prompts FILE.jsonl, not both");
    ZAYA_CHECK(!a->prompt.empty() || !a->prompts.empty(),
               "zaya generate needs --prompt TEXT or --prompts FILE.jsonl");
    // Before the model loads: /dev/zero or a FIFO is refused at once, not after a minute.
    if (!a->prompts.empty()) require_regular_file(a->prompts, "--prompts");
    const InferenceModel im = load_inference_model(a->model, a->tokenizer, a->device, a->precision);
    ZayaModel& model = *im.loaded.model;
    const Tokenizer& tokenizer = *im.tokenizer;
    const ModelConfig& c = model.config();
    // The same request as zaya serve would take: its rules, its model name, its context; token ids
    // within the tokenizer's (a padded vocabulary's padding has no text).
    const serve::RequestLimits limits{default_model_name(im), int(c.max_seq_len),
                                      tokenizer.vocab_size()};
    serve::CompletionRequest base;
    base.max_tokens = 64;
    base.sampling.temperature = 0.8f;
    base.seed = 0;
    json fields = flag_fields(*a);
    if (!a->prompt.empty()) fields["prompt"] = a->prompt;
    const serve::CompletionRequest defaults =
        parse_request(fields, limits, base, !a->prompt.empty(), "");
    std::vector<Request> requests =
        a->prompts.empty()
            ? std::vector<Request>{make_request(defaults, tokenizer, c.max_seq_len, "--prompt")}
            : read_prompts(a->prompts, defaults, limits, tokenizer, c.max_seq_len,
                           a->max_record_bytes);
    const int32_t eos = a->no_eos ? -1 : tokenizer.end_of_text_id().value_or(-1);
    for (Request& rq : requests) {
      rq.opt.eos = eos;
      rq.opt.drawable = int32_t(tokenizer.vocab_size());
    }
    // Under a launcher with several ranks, every cache is sharded over them (tree attention);
    // every rank runs the same requests and rank 0 prints.
    const std::unique_ptr<dist::Communicator> comm = dist::make_communicator();
    dist::Communicator* shard = comm->world_size() > 1 ? comm.get() : nullptr;
    if (!a->prompts.empty()) {
      run_batched(model, tokenizer, requests, a->batch, shard);
      return 0;
    }
    Decoder decoder(model, 0, shard);
    const bool stream = !a->json_out;
    const Outcome o = run_one(decoder, tokenizer, requests[0], stream);
    if (!stream) {
      print_json_line(outcome_json(requests[0], o, c));
      return 0;
    }
    const double tps = o.tokens > 1 && o.decode_s > 0 ? double(o.tokens - 1) / o.decode_s : 0;
    std::printf("\n");
    if (shard && shard->rank() != 0) return 0;  // rank 0 reports for all
    std::fprintf(stderr,
                 "[%zu prompt tokens, %zu generated (%s); time to first token %.1f ms, %.1f "
                 "tokens/s after it; cache %lld bytes per token (multi-head attention: %lld, "
                 "grouped-query: %lld), %.1f MiB allocated%s]\n",
                 o.prompt_tokens, o.tokens, o.finish_reason.c_str(), o.ttft_s * 1e3, tps,
                 (long long)BatchDecoder::cache_bytes_per_token(c),
                 (long long)BatchDecoder::mha_cache_bytes_per_token(c),
                 (long long)BatchDecoder::gqa_cache_bytes_per_token(c),
                 double(decoder.cache_bytes_allocated()) / 1048576,
                 shard ? (" on each of " + std::to_string(shard->world_size()) +
                          " ranks (tree attention: each holds 1/" +
                          std::to_string(shard->world_size()) + " of the positions)")
                             .c_str()
                       : "");
    return 0;
  };
}

}  // namespace zaya::cli
