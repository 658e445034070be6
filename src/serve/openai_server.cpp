#include "serve/openai_server.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "infer/text_stream.h"
#include "serve/completion_request.h"
#include "serve/logprobs.h"
#include "serve/tokenizer_endpoints.h"

namespace zaya::serve {

using nlohmann::json;

namespace {

// What the engine thread hands a request's HTTP thread: settled text as it comes, then the end.
struct Channel {
  std::mutex m;
  std::condition_variable cv;
  std::string text;  // settled, not yet taken by the HTTP thread
  bool done = false;
  std::string finish_reason;  // OpenAI's: "stop" (eos or a stop string) or "length"
  size_t completion_tokens = 0;
  double ttft_s = 0;
  std::atomic<bool> cancelled{false};  // the client went away
  std::unique_ptr<TextStream> stream;  // used on the engine thread only
  // With logprobs (written on the engine thread, read once done): the prompt's entries, the drawn
  // tokens' entries, and the logits the next token is drawn from.
  int top_n = -1;
  std::vector<TokenLogprob> prompt_lps, drawn_lps;
  std::vector<float> draw_logits;
};

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.body()), "application/json");
}

}  // namespace

struct OpenAiServer::Impl {
  ZayaModel& model;
  const Tokenizer& tok;
  ServeOptions opt;
  InferenceEngine engine;
  httplib::Server http;
  std::mutex tok_mutex;  // Tokenizer is not thread-safe (it caches encodings)
  std::atomic<bool> draining{false}, engine_stop{false};
  // Completion requests between their handler's start and the last byte of their response.
  std::mutex flight_mutex;
  std::condition_variable flight_cv;
  int in_flight = 0;
  void flight_begin() {
    std::lock_guard<std::mutex> lock(flight_mutex);
    ++in_flight;
  }
  void flight_end() {
    std::lock_guard<std::mutex> lock(flight_mutex);
    if (--in_flight == 0) flight_cv.notify_all();
  }
  // Ends the in-flight count of a request when its handler returns, unless the response is a
  // stream (whose provider ends it after the last event).
  struct FlightGuard {
    Impl* impl;
    bool armed = true;
    ~FlightGuard() {
      if (armed) impl->flight_end();
    }
  };
  std::atomic<uint64_t> next_id{1};
  int64_t created = int64_t(std::time(nullptr));
  int32_t eos = -1;
  int max_tokens_limit;

  TokenizerEndpoints tokenizer_endpoints() const {
    return TokenizerEndpoints{tok, opt.model_name, engine.context(), model.config().vocab_size};
  }
  // Answers with what `call` returns, or its ApiError; the tokenizer is used by one thread at once.
  template <typename Call>
  void tokenizer_call(httplib::Response& res, Call call) {
    try {
      std::lock_guard<std::mutex> lock(tok_mutex);
      res.set_content(dump(call()), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  }

  static EngineLimits engine_limits(const ZayaModel& model, const ServeOptions& o) {
    EngineLimits l;
    l.decoder.max_sequences = o.max_batch;
    l.decoder.capacity = o.context > 0 ? o.context : model.config().max_seq_len;
    l.max_queue = o.max_queue;
    return l;
  }

  Impl(ZayaModel& m, const Tokenizer& t, const ServeOptions& o)
      : model(m), tok(t), opt(o), engine(m, engine_limits(m, o)) {
    eos = tok.end_of_text_id().value_or(-1);
    max_tokens_limit =
        int(opt.max_tokens_limit > 0 ? std::min<int64_t>(opt.max_tokens_limit, engine.context())
                                     : engine.context());
    // One HTTP thread per connection in flight: every running and queued request, and a few for
    // /health and the requests that will be refused.
    const size_t threads = size_t(opt.max_batch) + opt.max_queue + 4;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(opt.max_body_bytes);
    http.set_keep_alive_timeout(2);
    http.Post("/v1/completions",
              [this](const httplib::Request& rq, httplib::Response& res) { completion(rq, res); });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump(json{{"object", "list"},
                                {"data",
                                 {{{"id", opt.model_name},
                                   {"object", "model"},
                                   {"created", created},
                                   {"owned_by", "zaya"}}}}}),
                      "application/json");
    });
    http.Post("/tokenize", [this](const httplib::Request& rq, httplib::Response& res) {
      tokenizer_call(res, [&] { return tokenizer_endpoints().tokenize(rq.body); });
    });
    http.Post("/detokenize", [this](const httplib::Request& rq, httplib::Response& res) {
      tokenizer_call(res, [&] { return tokenizer_endpoints().detokenize(rq.body); });
    });
    http.Get("/tokenizer_info", [this](const httplib::Request&, httplib::Response& res) {
      tokenizer_call(res, [&] { return tokenizer_endpoints().info(); });
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.status = draining ? 503 : 200;
      res.set_content(dump(json{{"status", draining ? "draining" : "ok"},
                                {"running", engine.running()},
                                {"queued", engine.queued()}}),
                      "application/json");
    });
    // Unknown paths, wrong methods, bodies over the limit: OpenAI-style errors too.
    http.set_error_handler([](const httplib::Request& rq, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string what = res.status == 404   ? "no route " + rq.method + " " + rq.path
                               : res.status == 413 ? "the request body is too large"
                                                   : "HTTP error " + std::to_string(res.status);
      res.set_content(dump(ApiError(res.status, what).body()), "application/json");
    });
    http.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "internal error";
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          std::fprintf(stderr, "zaya serve: %s\n", what.c_str());
          send_error(res, ApiError(500, what, {}, "server_error"));
        });
  }

  // The ids of one prompt, checked against the context with `max_tokens` to draw (at least one:
  // echo with max_tokens 0 still draws one token, which is not reported).
  std::vector<int32_t> prompt_ids(const PromptInput& p, int max_tokens, const std::string& field) {
    std::vector<int32_t> ids = p.tokens;
    if (!p.is_tokens) {
      std::lock_guard<std::mutex> lock(tok_mutex);
      ids = tok.encode(p.text);
    }
    if (ids.empty()) throw ApiError(400, "'" + field + "': encodes to no tokens", field);
    const int64_t draws = std::max(max_tokens, 1);
    if (int64_t(ids.size()) + draws > engine.context())
      throw ApiError(400,
                     "this model's context is " + std::to_string(engine.context()) +
                         " tokens; the prompt has " + std::to_string(ids.size()) +
                         " and max_tokens asks for " + std::to_string(draws) +
                         ": shorten the prompt or lower max_tokens",
                     field, "invalid_request_error", "context_length_exceeded");
    return ids;
  }

  // The engine request of one prompt, its text and end going to `ch`.
  EngineRequest engine_request(const std::shared_ptr<Channel>& ch,
                               const std::vector<int32_t>& prompt, const CompletionRequest& cr) {
    ch->stream = std::make_unique<TextStream>(tok, cr.stop, eos);
    EngineRequest er;
    er.prompt = prompt;
    er.opt.max_new_tokens = std::max(cr.max_tokens, 1);
    er.opt.eos = eos;
    er.opt.sampling = cr.sampling;
    er.opt.sampling.seed = cr.seed ? *cr.seed : std::random_device{}();
    er.on_token = [this, ch](int32_t t) {
      if (ch->top_n >= 0)
        ch->drawn_lps.push_back(token_logprob_entry(ch->draw_logits, t, ch->top_n));
      if (ch->cancelled) return false;
      std::string piece;
      {
        std::lock_guard<std::mutex> lock(tok_mutex);
        piece = ch->stream->push(t);
      }
      if (!piece.empty()) {
        std::lock_guard<std::mutex> lock(ch->m);
        ch->text += piece;
        ch->cv.notify_all();
      }
      return !ch->stream->stopped();
    };
    er.on_done = [this, ch](const EngineResult& r) {
      std::string rest;
      {
        std::lock_guard<std::mutex> lock(tok_mutex);
        rest = ch->stream->finish();
      }
      std::lock_guard<std::mutex> lock(ch->m);
      ch->text += rest;
      ch->finish_reason = r.finish_reason == "length" ? "length" : "stop";
      ch->completion_tokens = r.tokens.size();
      ch->ttft_s = r.ttft_seconds;
      ch->done = true;
      ch->cv.notify_all();
    };
    if (cr.logprobs) {
      ch->top_n = *cr.logprobs;
      er.on_draw_logits = [ch](std::span<const float> l) {
        ch->draw_logits.assign(l.begin(), l.end());
      };
      if (cr.echo)
        er.on_prompt_logits = [ch, prompt,
                               V = size_t(model.config().vocab_size)](std::span<const float> all) {
          ch->prompt_lps.push_back(TokenLogprob{prompt[0], std::nullopt, {}});
          for (size_t t = 1; t < prompt.size(); ++t)
            ch->prompt_lps.push_back(
                token_logprob_entry(all.subspan((t - 1) * V, V), prompt[t], ch->top_n));
        };
    }
    return er;
  }

  // One choice of a finished request: its text (the prompt's first with echo) and logprobs.
  json choice_json(size_t index, const Channel& ch, const PromptInput& p,
                   const std::vector<int32_t>& prompt, const CompletionRequest& cr) {
    const bool drawn = cr.max_tokens > 0;  // echo with max_tokens 0 reports no drawn token
    std::string text;
    if (cr.echo) {
      std::lock_guard<std::mutex> lock(tok_mutex);
      text = p.is_tokens ? tok.decode(prompt) : p.text;
    }
    if (drawn) text += ch.text;
    json logprobs = nullptr;
    if (cr.logprobs) {
      std::vector<TokenLogprob> entries = ch.prompt_lps;
      if (drawn) entries.insert(entries.end(), ch.drawn_lps.begin(), ch.drawn_lps.end());
      std::lock_guard<std::mutex> lock(tok_mutex);
      logprobs = logprobs_json(tok, entries, 0);
    }
    return json{{"text", text},
                {"index", index},
                {"logprobs", logprobs},
                {"finish_reason", drawn ? json(ch.finish_reason) : json("length")}};
  }

  // A request that is not streamed: every prompt queued at once, answered together.
  void answer_batch(const CompletionRequest& cr, httplib::Response& res,
                    std::chrono::steady_clock::time_point t0) {
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < cr.prompts.size(); ++i)
      prompts.push_back(
          prompt_ids(cr.prompts[i], cr.max_tokens,
                     cr.prompts.size() == 1 ? "prompt" : "prompt[" + std::to_string(i) + "]"));
    std::vector<std::shared_ptr<Channel>> channels;
    for (const std::vector<int32_t>& prompt : prompts) {
      auto ch = std::make_shared<Channel>();
      bool queued = false;
      try {
        queued = engine.submit(engine_request(ch, prompt, cr));
      } catch (const Error& e) {
        for (auto& c : channels) c->cancelled = true;
        throw ApiError(400, e.what());
      }
      if (!queued) {
        for (auto& c : channels) c->cancelled = true;
        res.set_header("Retry-After", "1");
        throw ApiError(429,
                       "the server is busy: " + std::to_string(opt.max_queue) +
                           " requests are already waiting; retry later",
                       {}, "rate_limit_error");
      }
      channels.push_back(ch);
    }
    json choices = json::array();
    size_t prompt_tokens = 0, completion_tokens = 0;
    for (size_t i = 0; i < channels.size(); ++i) {
      Channel& ch = *channels[i];
      {
        std::unique_lock<std::mutex> lock(ch.m);
        ch.cv.wait(lock, [&] { return ch.done; });
      }
      choices.push_back(choice_json(i, ch, cr.prompts[i], prompts[i], cr));
      prompt_tokens += prompts[i].size();
      completion_tokens += cr.max_tokens > 0 ? ch.completion_tokens : 0;
    }
    res.set_content(dump(json{{"id", "cmpl-" + std::to_string(next_id++)},
                              {"object", "text_completion"},
                              {"created", int64_t(std::time(nullptr))},
                              {"model", opt.model_name},
                              {"choices", choices},
                              {"usage",
                               {{"prompt_tokens", prompt_tokens},
                                {"completion_tokens", completion_tokens},
                                {"total_tokens", prompt_tokens + completion_tokens}}}}),
                    "application/json");
    std::fprintf(stderr,
                 "zaya serve: POST /v1/completions 200: %zu prompt(s), %zu prompt tokens, %zu "
                 "generated, %.2f s in all\n",
                 prompts.size(), prompt_tokens, completion_tokens,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

  void completion(const httplib::Request& hreq, httplib::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    flight_begin();  // before the draining check: stop() waits for every request counted here
    FlightGuard guard{this};
    CompletionRequest cr;
    std::vector<int32_t> prompt;
    try {
      if (draining) {
        res.set_header("Connection", "close");
        throw ApiError(503, "the server is shutting down", {}, "server_error");
      }
      cr = parse_completion_request(hreq.body, opt.model_name, max_tokens_limit,
                                    model.config().vocab_size);
      if (!cr.stream) {
        answer_batch(cr, res, t0);
        return;
      }
      prompt = prompt_ids(cr.prompts[0], cr.max_tokens, "prompt");
    } catch (const ApiError& e) {
      send_error(res, e);
      return;
    }
    auto ch = std::make_shared<Channel>();
    if (!submit(engine_request(ch, prompt, cr), res)) return;
    const StreamReply reply{"cmpl-" + std::to_string(next_id++), prompt.size(), t0,
                            cr.include_usage};
    guard.armed = false;  // the stream's releaser ends the request's flight
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, ch, reply](size_t, httplib::DataSink& sink) {
          return stream_events(*ch, reply, sink);
        },
        [this, ch](bool success) {
          if (!success) ch->cancelled = true;
          flight_end();
        });
  }

  // Queues one request; false after answering 429 (a full queue) or 400.
  bool submit(EngineRequest er, httplib::Response& res) {
    try {
      if (!engine.submit(std::move(er)))
        throw ApiError(429,
                       "the server is busy: " + std::to_string(opt.max_queue) +
                           " requests are already waiting; retry later",
                       {}, "rate_limit_error");
    } catch (const ApiError& e) {
      res.set_header("Retry-After", "1");
      send_error(res, e);
      return false;
    } catch (const Error& e) {
      send_error(res, ApiError(400, e.what()));
      return false;
    }
    return true;
  }

  // What a streamed answer needs besides its channel: its id, its prompt's length (for the
  // usage), when it came (for the log line), and whether the client asked for the usage.
  struct StreamReply {
    std::string id;
    size_t prompt_tokens;
    std::chrono::steady_clock::time_point t0;
    bool include_usage;
    json usage(size_t completion) const {
      return json{{"prompt_tokens", prompt_tokens},
                  {"completion_tokens", completion},
                  {"total_tokens", prompt_tokens + completion}};
    }
    void log(const Channel& c, const char* how) const {
      std::fprintf(stderr,
                   "zaya serve: POST /v1/completions %s: %zu prompt tokens, %zu generated (%s), "
                   "first token %.1f ms, %.2f s in all\n",
                   how, prompt_tokens, c.completion_tokens, c.finish_reason.c_str(), c.ttft_s * 1e3,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  };

  // One call of the stream's content provider: the text settled since the last call as an
  // event, then at the end the finish, the usage when asked for, and [DONE]. False when the
  // client went away (the engine then ends the request) or the stream is over.
  bool stream_events(Channel& ch, const StreamReply& r, httplib::DataSink& sink) {
    const auto event = [&](const json& j) {
      const std::string s = "data: " + dump(j) + "\n\n";
      return sink.write(s.data(), s.size());
    };
    const auto chunk = [&](const std::string& text, const json& finish) {
      return json{
          {"id", r.id},
          {"object", "text_completion"},
          {"created", int64_t(std::time(nullptr))},
          {"model", opt.model_name},
          {"choices",
           {{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}}}}};
    };
    std::string text;
    bool done;
    {
      std::unique_lock<std::mutex> lock(ch.m);
      ch.cv.wait(lock, [&] { return ch.done || !ch.text.empty(); });
      text.swap(ch.text);
      done = ch.done;
    }
    if (!text.empty() && !event(chunk(text, nullptr))) {
      ch.cancelled = true;  // the client went away: the engine ends the request
      return false;
    }
    if (!done) return true;
    bool ok = event(chunk("", ch.finish_reason));
    if (ok && r.include_usage) {
      json u = chunk("", nullptr);
      u["choices"] = json::array();
      u["usage"] = r.usage(ch.completion_tokens);
      ok = event(u);
    }
    if (ok) {
      const std::string last = "data: [DONE]\n\n";
      ok = sink.write(last.data(), last.size());
    }
    r.log(ch, "200 (stream)");
    if (ok) sink.done();
    return ok;
  }

  void engine_loop() {
    while (!engine_stop) {
      if (!engine.tick()) engine.wait_for_work(std::chrono::milliseconds(50));
    }
  }
};

OpenAiServer::OpenAiServer(ZayaModel& model, const Tokenizer& tokenizer,
                           const ServeOptions& options)
    : impl_(std::make_unique<Impl>(model, tokenizer, options)) {}

OpenAiServer::~OpenAiServer() = default;

int OpenAiServer::bind() {
  const ServeOptions& o = impl_->opt;
  if (o.port == 0) {
    const int port = impl_->http.bind_to_any_port(o.host);
    ZAYA_CHECK(port > 0, "zaya serve: cannot listen on ", o.host, " (any port)");
    return port;
  }
  ZAYA_CHECK(impl_->http.bind_to_port(o.host, o.port), "zaya serve: cannot listen on ", o.host, ":",
             o.port, " (in use, or not an address of this machine)");
  return o.port;
}

void OpenAiServer::run() {
  std::thread engine([this] { impl_->engine_loop(); });
  // Returns after stop(), once httplib's threads have finished every connection in flight; the
  // engine keeps decoding for them until then.
  impl_->http.listen_after_bind();
  impl_->engine_stop = true;
  engine.join();
}

void OpenAiServer::stop() {
  // New requests get 503 from here on; once the requests in flight have sent their last byte the
  // listening socket closes. (httplib's stop() cuts streams that are still being written, so it
  // must come after them.)
  impl_->draining = true;
  {
    std::unique_lock<std::mutex> lock(impl_->flight_mutex);
    impl_->flight_cv.wait(lock, [&] { return impl_->in_flight == 0; });
  }
  impl_->http.stop();
}

int OpenAiServer::in_flight() const {
  std::lock_guard<std::mutex> lock(impl_->flight_mutex);
  return impl_->in_flight;
}

}  // namespace zaya::serve
