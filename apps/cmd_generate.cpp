// zaya generate: text from a model with the CCA-cache decoder (infer/), streamed as it is drawn.
#include "cmd_generate.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "dist/communicator.h"
#include "infer/decoder.h"
#include "infer/engine.h"
#include "infer/generate.h"
#include "infer/text_stream.h"
#include "inference_model.h"

namespace zaya::cli {

namespace {

using nlohmann::json;

struct GenerateArgs {
  std::string model, tokenizer, prompt, prompts;
  std::vector<std::string> stop;
  GenerateOptions opt;
  bool no_eos = false, json_out = false;
  int batch = 16;
};

struct Request {
  std::string prompt;
  GenerateOptions opt;
  std::vector<std::string> stop;
  std::string where;  // FILE:LINE of a --prompts request, for its errors
};

struct Outcome {
  std::string text, finish_reason;
  size_t prompt_tokens = 0, tokens = 0;
  double ttft_s = 0, decode_s = 0;
};

std::vector<int32_t> encode_prompt(const Tokenizer& tok, const std::string& prompt) {
  std::vector<int32_t> ids = tok.encode(prompt);
  ZAYA_CHECK(!ids.empty(),
             "the prompt encodes to no tokens (give some text, or a tokenizer that "
             "adds a BOS token)");
  return ids;
}

// One prompt through the one-sequence decoder (its window slides past the context), streamed.
Outcome run_one(Decoder& decoder, const Tokenizer& tok, const Request& rq, bool stream) {
  const std::vector<int32_t> ids = encode_prompt(tok, rq.prompt);
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
    try {
      er.prompt = encode_prompt(tok, rq.prompt);
    } catch (const Error& e) {
      throw Error(rq.where + ": " + e.what());
    }
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

std::vector<Request> read_prompts(const std::string& path, const GenerateArgs& a) {
  std::ifstream f(path);
  ZAYA_CHECK(f.good(), "--prompts: cannot open '", path, "'");
  std::vector<Request> out;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      throw Error(where + ": not JSON (" + e.what() + ")");
    }
    ZAYA_CHECK(j.is_object() && j.contains("prompt") && j["prompt"].is_string(), where,
               ": each line is an object with a string field 'prompt'");
    Request rq{j["prompt"].get<std::string>(), a.opt, a.stop, where};
    for (const auto& [key, v] : j.items()) {
      try {
        if (key == "prompt") continue;
        if (key == "max_tokens")
          rq.opt.max_new_tokens = v.get<int>();
        else if (key == "temperature")
          rq.opt.sampling.temperature = v.get<float>();
        else if (key == "top_k")
          rq.opt.sampling.top_k = v.get<int>();
        else if (key == "top_p")
          rq.opt.sampling.top_p = v.get<float>();
        else if (key == "repetition_penalty")
          rq.opt.sampling.repetition_penalty = v.get<float>();
        else if (key == "seed")
          rq.opt.sampling.seed = v.get<uint64_t>();
        else if (key == "stop")
          rq.stop = v.get<std::vector<std::string>>();
        else
          throw Error(where + ": unknown field '" + key +
                      "' (prompt, max_tokens, temperature, top_k, top_p, repetition_penalty, "
                      "seed, stop)");
      } catch (const json::exception&) {
        throw Error(where + ": field '" + key + "' has the wrong type");
      }
    }
    ZAYA_CHECK(rq.opt.max_new_tokens >= 1, where, ": max_tokens must be >= 1");
    try {
      validate_sampling(rq.opt.sampling);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    out.push_back(std::move(rq));
  }
  ZAYA_CHECK(!out.empty(), "--prompts: '", path, "' holds no prompt");
  return out;
}

}  // namespace

Runner add_generate_commands(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  a->opt.sampling.temperature = 0.8f;
  a->opt.max_new_tokens = 64;
  auto* gen = app.add_subcommand(
      "generate",
      "Generate text with the CCA-cache decoder: the prompt in one forward, then a token at a "
      "time; streams the text and reports time to first token, tokens/s and cache bytes");
  gen->add_option("--model", a->model,
                  "HF model directory, zaya checkpoint or a run's ckpt/ root (as zaya score)")
      ->required();
  gen->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json (default: the model directory's tokenizer.json)");
  gen->add_option("--prompt", a->prompt, "text to continue");
  gen->add_option("--prompts", a->prompts,
                  "JSON lines, one request each: {\"prompt\": ..., and optionally max_tokens, "
                  "temperature, top_k, top_p, repetition_penalty, seed, stop}; prints one JSON "
                  "line per request");
  gen->add_option("--max-tokens", a->opt.max_new_tokens, "tokens to generate at most")
      ->check(IntIn(1, 1 << 20))
      ->capture_default_str();
  gen->add_option("--temperature", a->opt.sampling.temperature, "0: greedy")
      ->check(NonNegative())
      ->capture_default_str();
  gen->add_option("--top-k", a->opt.sampling.top_k, "sample among the k likeliest (0: all)")
      ->check(IntIn(0, INT32_MAX))
      ->capture_default_str();
  gen->add_option("--top-p", a->opt.sampling.top_p,
                  "sample among the likeliest tokens whose probability reaches p")
      ->check(RealIn(0.0, 1.0))
      ->capture_default_str();
  gen->add_option("--repetition-penalty", a->opt.sampling.repetition_penalty,
                  "> 1 discourages tokens already in the context (1: off)")
      ->check(Positive())
      ->capture_default_str();
  gen->add_option("--seed", a->opt.sampling.seed,
                  "sampling seed: the same prompt, settings and seed give the same text")
      ->capture_default_str()
      ->check(Seed());
  gen->add_option("--stop", a->stop, "stop when the text contains this string (repeatable)");
  gen->add_flag("--no-eos", a->no_eos, "do not stop at the tokenizer's end-of-text token");
  gen->add_flag("--json", a->json_out, "with --prompt: print one JSON line instead of streaming");
  gen->add_option("--batch", a->batch,
                  "with --prompts: requests decoded together (continuous batching: a finished "
                  "request's slot goes to the next); each request's text is the same at any batch")
      ->check(IntIn(1, 1024))
      ->capture_default_str();

  return [=]() -> int {
    if (!*gen) return kNotMine;
    ZAYA_CHECK(a->prompt.empty() || a->prompts.empty(),
               "zaya generate takes --prompt TEXT or --prompts FILE.jsonl, not both");
    ZAYA_CHECK(!a->prompt.empty() || !a->prompts.empty(),
               "zaya generate needs --prompt TEXT or --prompts FILE.jsonl");
    validate_sampling(a->opt.sampling);
    std::vector<Request> requests =
        a->prompts.empty() ? std::vector<Request>{{a->prompt, a->opt, a->stop, "--prompt"}}
                           : read_prompts(a->prompts, *a);
    const InferenceModel im = load_inference_model(a->model, a->tokenizer);
    ZayaModel& model = *im.loaded.model;
    const Tokenizer& tokenizer = *im.tokenizer;
    const ModelConfig& c = model.config();
    const int32_t eos = a->no_eos ? -1 : tokenizer.end_of_text_id().value_or(-1);
    for (Request& rq : requests) rq.opt.eos = eos;
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
