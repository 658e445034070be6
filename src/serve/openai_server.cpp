#include "serve/openai_server.h"

#include <httplib.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <set>
#include <shared_mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/error.h"
#include "infer/text_stream.h"
#include "serve/completion_channel.h"
#include "serve/completion_request.h"
#include "serve/http_guard.h"
#include "serve/logprobs.h"
#include "serve/tokenizer_endpoints.h"

namespace zaya::serve {

using nlohmann::json;

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.body()), "application/json");
}

}  // namespace

HttpLimits http_limits(const ServeOptions& o) {
  HttpLimits l;
  l.max_body_bytes = o.max_body_bytes;
  l.max_connections = o.max_connections;
  l.threads = o.http_threads;
  return l;
}

struct OpenAiServer::Impl {
  ZayaModel& model;
  const Tokenizer& tok;
  ServeOptions opt;
  // The engine, rebuilt by the engine thread (under the unique lock) when a step fails; HTTP
  // threads use it under the shared lock.
  std::shared_mutex engine_mutex;
  std::unique_ptr<InferenceEngine> engine;
  int64_t context;
  GuardedServer http;
  std::mutex tok_mutex;  // Tokenizer is not thread-safe (it caches encodings)
  // draining: new requests get 503; aborting: the drain deadline passed, requests still in
  // flight are ended.
  std::atomic<bool> draining{false}, aborting{false}, engine_stop{false};
  std::function<void()> on_listening;
  // Every request the engine holds, so that a failed engine step or the drain deadline can end
  // them.
  std::mutex live_mutex;
  std::set<std::shared_ptr<Channel>> live;
  // Ends every live request: with `error` (a failed engine step) or, when empty, by waking its
  // HTTP thread to see `aborting`.
  void end_live(const std::string& error) {
    std::lock_guard<std::mutex> lock(live_mutex);
    for (const auto& ch : live) {
      std::lock_guard<std::mutex> l2(ch->m);
      if (!error.empty() && !ch->done) {
        ch->error = error;
        ch->done = true;
      }
      ch->cv.notify_all();
    }
    if (!error.empty()) live.clear();
  }
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
    return TokenizerEndpoints{tok, opt.model_name, context, model.config().vocab_size};
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
      : model(m),
        tok(t),
        opt(o),
        engine(std::make_unique<InferenceEngine>(m, engine_limits(m, o))),
        context(engine->context()),
        http(http_limits(o)) {
    eos = tok.end_of_text_id().value_or(-1);
    max_tokens_limit =
        int(opt.max_tokens_limit > 0 ? std::min<int64_t>(opt.max_tokens_limit, context) : context);
    // Connections are read by one thread; complete requests are answered by threads started
    // when first needed, up to --http-threads. A request waiting in the engine's queue holds its
    // thread (httplib answers synchronously).
    http.new_task_queue = [this] {
      httplib::TaskQueue* queue = http.start_connections();
      if (on_listening) on_listening();
      return queue;
    };
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
      std::shared_lock<std::shared_mutex> lock(engine_mutex);
      res.set_content(dump(json{{"status", draining ? "draining" : "ok"},
                                {"running", engine->running()},
                                {"queued", engine->queued()}}),
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

  // The ids of one prompt, checked against the context (completion_request.h).
  std::vector<int32_t> prompt_ids(const PromptInput& p, int max_tokens, const std::string& field) {
    std::lock_guard<std::mutex> lock(tok_mutex);
    return prompt_token_ids(tok, p, max_tokens, context, field);
  }

  // The engine request of one prompt, its text and end going to `ch`.
  EngineRequest engine_request(const std::shared_ptr<Channel>& ch,
                               const std::vector<int32_t>& prompt, const CompletionRequest& cr) {
    ch->stream = std::make_unique<TextStream>(tok, cr.stop, eos);
    EngineRequest er;
    er.prompt = prompt;
    er.opt.max_new_tokens = std::max(cr.max_tokens, 1);
    er.opt.eos = eos;
    er.opt.drawable = int32_t(tok.vocab_size());
    er.opt.sampling = cr.sampling;
    er.opt.sampling.seed = cr.seed ? *cr.seed : std::random_device{}();
    using Fault = ServeOptions::TestFault;
    const Fault fault = cr.seed && *cr.seed == opt.test_fault_seed ? opt.test_fault : Fault::kNone;
    er.on_token = [this, ch, fault](int32_t t) {
      if (fault == Fault::kStep)
        throw Error("a test fault (ZAYA_SERVE_TEST_FAULT): this step fails");
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
        er.on_prompt_logits = [ch, prompt, V = size_t(model.config().vocab_size),
                               listable = size_t(tok.vocab_size())](std::span<const float> all) {
          ch->prompt_lps.push_back(TokenLogprob{prompt[0], std::nullopt, {}});
          for (size_t t = 1; t < prompt.size(); ++t)
            ch->prompt_lps.push_back(
                token_logprob_entry(all.subspan((t - 1) * V, V), prompt[t], ch->top_n, listable));
        };
    }
    return er;
  }

  // An error inside a request (on the engine thread): the request ends, its client gets a 500.
  void fail(Channel& ch, const std::string& what) {
    std::fprintf(stderr, "zaya serve: a request failed: %s\n", what.c_str());
    std::lock_guard<std::mutex> lock(ch.m);
    if (ch.error.empty()) ch.error = what;
    ch.cancelled = true;
  }

  // A drawn token: its text to the channel; false to end the request (cancelled, or a stop).
  bool on_token(Channel& ch, int32_t t) {
    if (ch.top_n >= 0)
      ch.drawn_lps.push_back(token_logprob_entry(ch.draw_logits, t, ch.top_n, tok.vocab_size()));
    if (ch.cancelled) return false;
    std::string piece;
    {
      std::lock_guard<std::mutex> lock(tok_mutex);
      piece = ch.stream->push(t);
    }
    if (!piece.empty()) {
      std::lock_guard<std::mutex> lock(ch.m);
      ch.text += piece;
      ch.cv.notify_all();
    }
    return !ch.stream->stopped();
  }

  // The end of a request: the text held back, the finish (done is set by the caller).
  void on_done(Channel& ch, const EngineResult& r) {
    {
      std::lock_guard<std::mutex> lock(live_mutex);
      for (auto it = live.begin(); it != live.end(); ++it)
        if (it->get() == &ch) {
          live.erase(it);
          break;
        }
    }
    std::string rest;
    {
      std::lock_guard<std::mutex> lock(tok_mutex);
      rest = ch.stream->finish();
    }
    std::lock_guard<std::mutex> lock(ch.m);
    ch.text += rest;
    ch.finish_reason = r.finish_reason == "length" ? "length" : "stop";
    ch.completion_tokens = r.tokens.size();
    ch.ttft_s = r.ttft_seconds;
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
        ch.cv.wait(lock, [&] { return ch.done || aborting; });
        if (!ch.done) {
          lock.unlock();
          cancel_all();
          throw ApiError(503,
                         "the server is shutting down and this request did not finish within "
                         "its --drain-timeout of " +
                             std::to_string(opt.drain_timeout_s) + " s",
                         {}, "server_error");
        }
        if (!ch.error.empty()) {
          lock.unlock();
          cancel_all();
          throw ApiError(500, "the request failed: " + ch.error, {}, "server_error");
        }
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
                 prompts.size(), prompt_tokens, completion_tokens, seconds_since(t0));
  }

  void completion(const httplib::Request& hreq, httplib::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    flight_begin();  // before the draining check: stop() waits for every request counted here
    FlightGuard guard{this};
    CompletionRequest cr;
    std::vector<int32_t> prompt;
    std::shared_ptr<Channel> ch;
    try {
      if (draining) {
        res.set_header("Connection", "close");
        throw ApiError(503, "the server is shutting down", {}, "server_error");
      }
      cr = parse_completion_request(hreq.body, opt.model_name, max_tokens_limit, tok.vocab_size());
      if (!cr.stream) {
        answer_batch(cr, res, t0);
        return;
      }
      prompt = prompt_ids(cr.prompts[0], cr.max_tokens, "prompt");
      ch = std::make_shared<Channel>();
      submit(ch, engine_request(ch, prompt, cr), res);
    } catch (const ApiError& e) {
      std::fprintf(stderr, "zaya serve: POST /v1/completions %d: %s\n", e.status, e.what());
      send_error(res, e);
      return;
    }
    const StreamReply reply{"cmpl-" + std::to_string(next_id++), prompt.size(), t0,
                            cr.include_usage};
    guard.armed = false;  // the stream's releaser ends the request's flight
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, ch, reply](size_t, httplib::DataSink& sink) {
          return stream_events(*ch, reply, opt.model_name, aborting, sink);
        },
        [this, ch](bool success) {
          if (!success) ch->cancelled = true;
          flight_end();
        });
  }

  // Queues one request, its channel among the live ones; throws ApiError: 429 (a full queue,
  // with Retry-After), 400 (what the engine refuses), 503 (the engine is being restarted).
  void submit(const std::shared_ptr<Channel>& ch, EngineRequest er, httplib::Response& res) {
    std::shared_lock<std::shared_mutex> lock(engine_mutex);
    if (!engine)
      throw ApiError(503, "the engine is restarting after a failure; retry later", {},
                     "server_error");
    {
      std::lock_guard<std::mutex> l2(live_mutex);
      live.insert(ch);
    }
    bool queued = false;
    try {
      queued = engine->submit(std::move(er));
    } catch (const Error& e) {
      forget(ch);
      throw ApiError(400, e.what());
    }
    if (!queued) {
      forget(ch);
      res.set_header("Retry-After", "1");
      throw ApiError(429,
                     "the server is busy: " + std::to_string(opt.max_batch) +
                         " requests are decoding and " + std::to_string(opt.max_queue) +
                         " waiting (--max-batch, --max-queue); retry later",
                     {}, "rate_limit_error");
    }
  }
  void forget(const std::shared_ptr<Channel>& ch) {
    std::lock_guard<std::mutex> lock(live_mutex);
    live.erase(ch);
  }

  // Decodes until stop. A failed step (it should not happen: every request is checked before it
  // is queued) ends the requests the engine held with a 500 and starts a fresh engine; the
  // process keeps serving.
  void engine_loop() {
    while (!engine_stop) {
      try {
        std::shared_lock<std::shared_mutex> lock(engine_mutex);
        if (!engine) {
          lock.unlock();
          restart_engine();
        } else if (!engine->tick()) {
          engine->wait_for_work(std::chrono::milliseconds(50));
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr,
                     "zaya serve: a decoding step failed (%s); ending the requests it held and "
                     "starting the engine again\n",
                     e.what());
        {
          // No request is queued with the failed engine after the ones ended here (submit
          // answers 503 until the fresh engine is there).
          std::unique_lock<std::shared_mutex> lock(engine_mutex);
          engine.reset();
        }
        end_live(std::string("a decoding step failed: ") + e.what());
        restart_engine();
      }
    }
  }
  void restart_engine() {
    std::unique_lock<std::shared_mutex> lock(engine_mutex);
    engine.reset();
    try {
      engine = std::make_unique<InferenceEngine>(model, engine_limits(model, opt));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "zaya serve: cannot start the engine again (%s); retrying in 1 s\n",
                   e.what());
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::seconds(1));
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
    impl_->http.widen_backlog();
    return port;
  }
  if (!impl_->http.bind_to_port(o.host, o.port))
    ZAYA_FAIL("zaya serve: cannot listen on ", o.host, ":", o.port, ": ",
              bind_error(o.host, o.port), " (is another server on port ", o.port,
              "? choose another with --port)");
  impl_->http.widen_backlog();
  return o.port;
}

void OpenAiServer::run(const std::function<void()>& on_listening) {
  impl_->on_listening = on_listening;
  std::thread engine([this] { impl_->engine_loop(); });
  // Returns after stop(), once httplib's threads have finished every connection in flight; the
  // engine keeps decoding for them until then. It throws when the threads that answer cannot be
  // started; then nothing was said to be listening.
  std::exception_ptr failed;
  try {
    impl_->http.listen_after_bind();
  } catch (...) {
    failed = std::current_exception();
  }
  impl_->engine_stop = true;
  engine.join();
  if (failed) std::rethrow_exception(failed);
}

void OpenAiServer::stop() {
  // New requests get 503 from here on; once the requests in flight have sent their last byte the
  // listening socket closes. (httplib's stop() cuts streams that are still being written, so it
  // must come after them.)
  Impl& im = *impl_;
  im.draining = true;
  std::unique_lock<std::mutex> lock(im.flight_mutex);
  const auto idle = [&] { return im.in_flight == 0; };
  if (!im.flight_cv.wait_for(lock, std::chrono::seconds(im.opt.drain_timeout_s), idle)) {
    std::fprintf(
        stderr, "zaya serve: %d requests still in flight after --drain-timeout %d s: ending them\n",
        im.in_flight, im.opt.drain_timeout_s);
    im.aborting = true;
    lock.unlock();
    im.end_live("");
    lock.lock();
    im.flight_cv.wait_for(lock, std::chrono::seconds(5), idle);
  }
  lock.unlock();
  im.http.stop_connections();
  im.http.stop();
}

int OpenAiServer::in_flight() const {
  std::lock_guard<std::mutex> lock(impl_->flight_mutex);
  return impl_->in_flight;
}

}  // namespace zaya::serve
