// zaya generate: text from a model with the CCA-cache decoder (infer/), streamed as it is drawn.
#include "cmd_generate.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/hf_interop.h"
#include "core/error.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "tokenizer/tokenizer_files.h"

namespace zaya::cli {

namespace {

using nlohmann::json;

struct GenerateArgs {
  std::string model, tokenizer, prompt, prompts;
  std::vector<std::string> stop;
  GenerateOptions opt;
  bool no_eos = false, json_out = false;
};

struct Request {
  std::string prompt;
  GenerateOptions opt;
  std::vector<std::string> stop;
};

// Where `text` stops: the first occurrence of a stop string (npos: none).
size_t stop_at(const std::string& text, const std::vector<std::string>& stop) {
  size_t at = std::string::npos;
  for (const std::string& s : stop)
    if (!s.empty()) at = std::min(at, text.find(s));
  return at;
}

// Bytes at the end of `text` that may still change: an incomplete UTF-8 sequence, or the start
// of a stop string.
size_t unsettled_tail(const std::string& text, const std::vector<std::string>& stop) {
  size_t hold = 0;
  for (size_t back = 1; back <= std::min<size_t>(3, text.size()); ++back) {
    const unsigned char ch = static_cast<unsigned char>(text[text.size() - back]);
    if ((ch & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t need = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : ch >= 0xC0 ? 2 : 1;
    if (need > back) hold = back;
    break;
  }
  for (const std::string& s : stop)
    for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), text.size()); n > hold; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  return hold;
}

struct Outcome {
  std::string text, finish_reason;
  size_t prompt_tokens = 0, tokens = 0;
  double ttft_s = 0, decode_s = 0;
};

Outcome run_request(Decoder& decoder, const Tokenizer& tok, const Request& rq, bool stream) {
  const std::vector<int32_t> ids = tok.encode(rq.prompt);
  ZAYA_CHECK(!ids.empty(),
             "the prompt encodes to no tokens (give some text, or a tokenizer that "
             "adds a BOS token)");
  Outcome o;
  o.prompt_tokens = ids.size();
  std::vector<int32_t> generated;
  size_t printed = 0;
  bool stopped = false;
  const GenerateResult r = generate_tokens(decoder, ids, rq.opt, [&](int32_t t) {
    generated.push_back(t);
    o.text = tok.decode(generated);
    const size_t at = stop_at(o.text, rq.stop);
    if (at != std::string::npos) {
      o.text.resize(at);
      stopped = true;
    }
    if (stream) {
      const size_t settled =
          stopped ? o.text.size() : o.text.size() - unsettled_tail(o.text, rq.stop);
      if (settled > printed) {
        std::fwrite(o.text.data() + printed, 1, settled - printed, stdout);
        std::fflush(stdout);
        printed = settled;
      }
    }
    return !stopped;
  });
  if (stream && o.text.size() > printed) {
    std::fwrite(o.text.data() + printed, 1, o.text.size() - printed, stdout);
  }
  // The eos token itself is not part of the text.
  if (r.finish_reason == "eos") {
    generated.pop_back();
    o.text = tok.decode(generated);
  }
  o.finish_reason = r.finish_reason;
  o.tokens = r.tokens.size();
  o.ttft_s = r.prefill_seconds;
  o.decode_s = r.decode_seconds;
  return o;
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
    Request rq{j["prompt"].get<std::string>(), a.opt, a.stop};
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
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  gen->add_option("--temperature", a->opt.sampling.temperature, "0: greedy")
      ->check(NonNegative())
      ->capture_default_str();
  gen->add_option("--top-k", a->opt.sampling.top_k, "sample among the k likeliest (0: all)")
      ->check(CLI::Range(0, INT32_MAX))
      ->capture_default_str();
  gen->add_option("--top-p", a->opt.sampling.top_p,
                  "sample among the likeliest tokens whose probability reaches p")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  gen->add_option("--repetition-penalty", a->opt.sampling.repetition_penalty,
                  "> 1 discourages tokens already in the context (1: off)")
      ->check(Positive())
      ->capture_default_str();
  gen->add_option("--seed", a->opt.sampling.seed,
                  "sampling seed: the same prompt, settings and seed give the same text")
      ->capture_default_str();
  gen->add_option("--stop", a->stop, "stop when the text contains this string (repeatable)");
  gen->add_flag("--no-eos", a->no_eos, "do not stop at the tokenizer's end-of-text token");
  gen->add_flag("--json", a->json_out, "with --prompt: print one JSON line instead of streaming");

  return [=]() -> int {
    if (!*gen) return kNotMine;
    ZAYA_CHECK(a->prompt.empty() || a->prompts.empty(),
               "zaya generate takes --prompt TEXT or --prompts FILE.jsonl, not both");
    ZAYA_CHECK(!a->prompt.empty() || !a->prompts.empty(),
               "zaya generate needs --prompt TEXT or --prompts FILE.jsonl");
    validate_sampling(a->opt.sampling);
    std::vector<Request> requests = a->prompts.empty()
                                        ? std::vector<Request>{{a->prompt, a->opt, a->stop}}
                                        : read_prompts(a->prompts, *a);
    LoadedModel m = load_model_any(a->model);
    for (const std::string& w : m.warnings) std::fprintf(stderr, "zaya: warning: %s\n", w.c_str());
    std::string tok_path = a->tokenizer;
    if (tok_path.empty()) {
      tok_path = m.path + "/tokenizer.json";
      struct stat st {};
      ZAYA_CHECK(::stat(tok_path.c_str(), &st) == 0, "--tokenizer: '", m.path,
                 "' has no tokenizer.json; name the model's tokenizer with --tokenizer");
    }
    const auto tok = load_tokenizer(tok_path);
    const ModelConfig& c = m.model->config();
    ZAYA_CHECK(tok->vocab_size() <= c.vocab_size, "--tokenizer ", tok_path, " has ",
               tok->vocab_size(), " tokens but the model has ", c.vocab_size,
               ": not this model's tokenizer");
    const int32_t eos = a->no_eos ? -1 : tok->end_of_text_id().value_or(-1);
    Decoder decoder(*m.model);
    const bool stream = a->prompts.empty() && !a->json_out;
    for (Request& rq : requests) {
      rq.opt.eos = eos;
      const Outcome o = run_request(decoder, *tok, rq, stream);
      const double tps = o.tokens > 1 && o.decode_s > 0 ? double(o.tokens - 1) / o.decode_s : 0;
      if (stream) {
        std::printf("\n");
        std::fprintf(stderr,
                     "[%zu prompt tokens, %zu generated (%s); time to first token %.1f ms, %.1f "
                     "tokens/s after it; cache %lld bytes per token (multi-head attention: %lld), "
                     "%.1f MiB allocated]\n",
                     o.prompt_tokens, o.tokens, o.finish_reason.c_str(), o.ttft_s * 1e3, tps,
                     (long long)Decoder::cache_bytes_per_token(c),
                     (long long)Decoder::mha_cache_bytes_per_token(c),
                     double(decoder.cache_bytes_allocated()) / 1048576);
      } else {
        const json j = {{"prompt", rq.prompt},
                        {"text", o.text},
                        {"finish_reason", o.finish_reason},
                        {"prompt_tokens", o.prompt_tokens},
                        {"tokens", o.tokens},
                        {"time_to_first_token_ms", o.ttft_s * 1e3},
                        {"tokens_per_s", tps},
                        {"cache_bytes_per_token", Decoder::cache_bytes_per_token(c)}};
        // Byte-level tokens can end a text inside a UTF-8 sequence: such bytes become U+FFFD.
        std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
      }
      std::fflush(stdout);
    }
    return 0;
  };
}

}  // namespace zaya::cli
