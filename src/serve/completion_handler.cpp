#include "serve/completion_handler.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>

#include "core/clock.h"
#include "core/error.h"
#include "infer/text_stream.h"
#include "serve/logprobs.h"
#include "serve/serve_options.h"

namespace zaya::serve {

using nlohmann::json;

CompletionHandler::CompletionHandler(EngineHost& engine, const TokenizerService& tokenizer,
                                     const ServeOptions& options, int64_t model_vocab,
                                     RequestFlight& flight, const ServerState& state,
                                     ServeMetrics& metrics)
    : engine_(engine),
      tokenizer_(tokenizer),
      opt_(options),
      model_vocab_(model_vocab),
      flight_(flight),
      state_(state),
      metrics_(metrics) {
  const int64_t context = engine.context();
  max_tokens_limit_ =
      int(opt_.max_tokens_limit > 0 ? std::min<int64_t>(opt_.max_tokens_limit, context) : context);
}

// The ids of one prompt, checked against the context (completion_request.h).
std::vector<int32_t> CompletionHandler::prompt_ids(const PromptInput& p, int max_tokens,
                                                   const std::string& field) {
  return tokenizer_.use([&](const Tokenizer& tok) {
    return prompt_token_ids(tok, p, max_tokens, engine_.context(), field);
  });
}

// The engine request of one prompt, its text and end going to `ch`.
EngineRequest CompletionHandler::engine_request(const std::shared_ptr<Channel>& ch,
                                                const std::vector<int32_t>& prompt,
                                                const CompletionRequest& cr) {
  ch->stream = tokenizer_.use([&](const Tokenizer& tok) {
    return std::make_unique<TextStream>(tok, cr.stop, tokenizer_.eos());
  });
  EngineRequest er;
  er.prompt = prompt;
  er.opt.max_new_tokens = std::max(cr.max_tokens, 1);
  er.opt.eos = tokenizer_.eos();
  er.opt.drawable = tokenizer_.vocab_size();
  er.opt.sampling = cr.sampling;
  er.opt.sampling.seed = cr.seed ? *cr.seed : std::random_device{}();
  using Fault = ServeOptions::TestFault;
  const Fault fault = cr.seed && *cr.seed == opt_.test_fault_seed ? opt_.test_fault : Fault::kNone;
  er.on_token = [this, ch, fault](int32_t t) {
    if (fault == Fault::kStep) throw Error("a test fault (ZAYA_SERVE_TEST_FAULT): this step fails");
    try {
      if (fault == Fault::kRequest)
        throw Error("a test fault (ZAYA_SERVE_TEST_FAULT): this request fails");
      return on_token(*ch, t);
    } catch (const std::exception& e) {
      fail(*ch, e.what());
      return false;
    }
  };
  er.on_done = [this, ch](const EngineResult& r) {
    try {
      on_done(*ch, r);
    } catch (const std::exception& e) {
      fail(*ch, e.what());
    }
    std::lock_guard<std::mutex> lock(ch->m);
    ch->done = true;
    ch->cv.notify_all();
  };
  if (cr.logprobs) {
    ch->top_n = *cr.logprobs;
    er.on_draw_logits = [ch](std::span<const float> l) {
      ch->draw_logits.assign(l.begin(), l.end());
    };
    if (cr.echo)
      er.on_prompt_logits = [ch, prompt, V = size_t(model_vocab_),
                             listable =
                                 size_t(tokenizer_.vocab_size())](std::span<const float> all) {
        ch->prompt_lps.push_back(TokenLogprob{prompt[0], std::nullopt, {}});
        for (size_t t = 1; t < prompt.size(); ++t)
          ch->prompt_lps.push_back(
              token_logprob_entry(all.subspan((t - 1) * V, V), prompt[t], ch->top_n, listable));
      };
  }
  return er;
}

// An error inside a request (on the engine thread): the request ends, its client gets a 500.
void CompletionHandler::fail(Channel& ch, const std::string& what) {
  std::fprintf(stderr, "zaya serve: a request failed: %s\n", what.c_str());
  std::lock_guard<std::mutex> lock(ch.m);
  if (ch.error.empty()) ch.error = what;
  ch.cancelled = true;
}

// A drawn token: its text to the channel; false to end the request (cancelled, or a stop).
bool CompletionHandler::on_token(Channel& ch, int32_t t) {
  if (ch.top_n >= 0)
    ch.drawn_lps.push_back(
        token_logprob_entry(ch.draw_logits, t, ch.top_n, tokenizer_.vocab_size()));
  if (ch.cancelled) return false;
  const std::string piece = tokenizer_.use([&](const Tokenizer&) { return ch.stream->push(t); });
  if (!piece.empty()) {
    std::lock_guard<std::mutex> lock(ch.m);
    ch.text += piece;
    ch.cv.notify_all();
  }
  return !ch.stream->stopped();
}

// The end of a request: the text held back, the finish (done is set by the caller).
void CompletionHandler::on_done(Channel& ch, const EngineResult& r) {
  engine_.forget(ch.id);
  const std::string rest = tokenizer_.use([&](const Tokenizer&) { return ch.stream->finish(); });
  std::lock_guard<std::mutex> lock(ch.m);
  ch.text += rest;
  ch.finish_reason = r.finish_reason == "length" ? "length" : "stop";
  ch.completion_tokens = r.tokens.size();
  ch.ttft_s = r.ttft_seconds;
}

// One choice of a finished request: its text (the prompt's first with echo) and logprobs.
json CompletionHandler::choice_json(size_t index, const Channel& ch, const PromptInput& p,
                                    const std::vector<int32_t>& prompt,
                                    const CompletionRequest& cr) {
  const bool drawn = cr.max_tokens > 0;  // echo with max_tokens 0 reports no drawn token
  std::string text;
  if (cr.echo)
    text = tokenizer_.use(
        [&](const Tokenizer& tok) { return p.is_tokens ? tok.decode(prompt) : p.text; });
  if (drawn) text += ch.text;
  json logprobs = nullptr;
  if (cr.logprobs) {
    std::vector<TokenLogprob> entries = ch.prompt_lps;
    if (drawn) entries.insert(entries.end(), ch.drawn_lps.begin(), ch.drawn_lps.end());
    logprobs = tokenizer_.use([&](const Tokenizer& tok) { return logprobs_json(tok, entries, 0); });
  }
  return json{{"text", text},
              {"index", index},
              {"logprobs", logprobs},
              {"finish_reason", drawn ? json(ch.finish_reason) : json("length")}};
}

// A request that is not streamed: every prompt queued at once, answered together.
void CompletionHandler::answer_batch(const CompletionRequest& cr, HttpResponse& res,
                                     std::chrono::steady_clock::time_point t0) {
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < cr.prompts.size(); ++i)
    prompts.push_back(
        prompt_ids(cr.prompts[i], cr.max_tokens,
                   cr.prompts.size() == 1 ? "prompt" : "prompt[" + std::to_string(i) + "]"));
  std::vector<std::shared_ptr<Channel>> channels;
  const auto cancel_all = [&] {
    for (auto& c : channels) c->cancelled = true;
  };
  for (const std::vector<int32_t>& prompt : prompts) {
    auto ch = std::make_shared<Channel>();
    try {
      submit(ch, engine_request(ch, prompt, cr), res);
    } catch (const ApiError&) {
      cancel_all();
      throw;
    }
    channels.push_back(ch);
  }
  json choices = json::array();
  size_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t i = 0; i < channels.size(); ++i) {
    Channel& ch = *channels[i];
    {
      std::unique_lock<std::mutex> lock(ch.m);
      ch.cv.wait(lock, [&] { return ch.done || state_.aborting; });
      if (!ch.done) {
        lock.unlock();
        cancel_all();
        throw ApiError(503,
                       "the server is shutting down and this request did not finish within "
                       "its --drain-timeout of " +
                           std::to_string(opt_.drain_timeout_s) + " s",
                       {}, "server_error");
      }
      if (!ch.error.empty()) {
        lock.unlock();
        cancel_all();
        throw ApiError(500, "the request failed: " + ch.error, {}, "server_error");
      }
    }
    metrics_.completion(ch.finish_reason, prompts[i].size(), ch.completion_tokens, ch.ttft_s,
                        seconds_since(t0));
    choices.push_back(choice_json(i, ch, cr.prompts[i], prompts[i], cr));
    prompt_tokens += prompts[i].size();
    completion_tokens += cr.max_tokens > 0 ? ch.completion_tokens : 0;
  }
  res.set_content(dump(json{{"id", "cmpl-" + std::to_string(next_id_++)},
                            {"object", "text_completion"},
                            {"created", int64_t(std::time(nullptr))},
                            {"model", opt_.model_name},
                            {"choices", choices},
                            {"usage",
                             {{"prompt_tokens", prompt_tokens},
                              {"completion_tokens", completion_tokens},
                              {"total_tokens", prompt_tokens + completion_tokens}}}}),
                  "application/json");
  std::fprintf(stderr,
               "zaya serve: POST /v1/completions 200: %zu prompt(s), %zu prompt tokens, %zu "
               "generated, %.2f s in all\n",
               prompts.size(), prompt_tokens, completion_tokens, seconds_since(t0));
}

void CompletionHandler::submit(const std::shared_ptr<Channel>& ch, EngineRequest er,
                               HttpResponse& res) {
  try {
    engine_.submit(ch, std::move(er));
  } catch (const ApiError& e) {
    if (e.status == 429) res.set_header("Retry-After", "1");
    throw;
  }
}

void CompletionHandler::operator()(const HttpRequest& request, HttpResponse& res) {
  const auto t0 = std::chrono::steady_clock::now();
  // Counted before the draining check: stop() waits for every request counted here.
  FlightGuard guard(flight_);
  CompletionRequest cr;
  std::vector<int32_t> prompt;
  std::shared_ptr<Channel> ch;
  try {
    if (state_.draining) {
      res.set_header("Connection", "close");
      throw ApiError(503, "the server is shutting down", {}, "server_error");
    }
    cr = parse_completion_request(request.body, opt_.model_name, max_tokens_limit_,
                                  tokenizer_.vocab_size());
    if (!cr.stream) {
      answer_batch(cr, res, t0);
      return;
    }
    prompt = prompt_ids(cr.prompts[0], cr.max_tokens, "prompt");
    ch = std::make_shared<Channel>();
    submit(ch, engine_request(ch, prompt, cr), res);
  } catch (const ApiError& e) {
    std::fprintf(stderr, "zaya serve: POST /v1/completions %d: %s\n", e.status, e.what());
    res.status = e.status;
    res.set_content(dump(e.body()), "application/json");
    return;
  }
  const StreamReply reply{"cmpl-" + std::to_string(next_id_++), prompt.size(), t0,
                          cr.include_usage};
  guard.disarm();  // the stream's end ends the request's flight
  res.set_header("Cache-Control", "no-cache");
  res.content_type = "text/event-stream";
  res.stream = [this, ch, reply](EventSink& sink) {
    return stream_events(*ch, reply, opt_.model_name, state_.aborting, sink);
  };
  res.stream_end = [this, ch, reply](bool complete) {
    if (!complete) ch->cancelled = true;
    if (complete)
      metrics_.completion(ch->finish_reason, reply.prompt_tokens, ch->completion_tokens, ch->ttft_s,
                          seconds_since(reply.t0));
    flight_.end();
  };
}

}  // namespace zaya::serve
