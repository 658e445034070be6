#include "serve/openai_server.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "serve/completion_channel.h"
#include "serve/completion_handler.h"
#include "serve/completion_request.h"
#include "serve/engine_host.h"
#include "serve/http_server.h"
#include "serve/request_flight.h"
#include "serve/serve_metrics.h"
#include "serve/tokenizer_endpoints.h"
#include "serve/tokenizer_service.h"

namespace zaya::serve {

using nlohmann::json;

namespace {

HttpLimits http_limits(const ServeOptions& o) {
  HttpLimits l;
  l.max_body_bytes = o.max_body_bytes;
  l.max_connections = o.max_connections;
  l.threads = o.http_threads;
  return l;
}

EngineLimits engine_limits(const ZayaModel& model, const ServeOptions& o) {
  EngineLimits l;
  l.decoder.max_sequences = o.max_batch;
  l.decoder.capacity = o.context > 0 ? o.context : model.config().max_seq_len;
  l.max_queue = o.max_queue;
  return l;
}

// An error the HTTP server answers itself, as OpenAI's error object.
std::string error_body(int status, const std::string& message) {
  return dump(
      ApiError(status, message, {}, status >= 500 ? "server_error" : "invalid_request_error")
          .body());
}

}  // namespace

// The server's parts: the engine on its thread, the tokenizer shared by the threads, the
// completions, and the HTTP server their routes are on.
struct OpenAiServer::Impl {
  ServeOptions opt;
  TokenizerService tokenizer;
  EngineHost engine;
  int64_t model_vocab;
  RequestFlight flight;
  ServerState state;
  ServeMetrics metrics;
  CompletionHandler completions;
  HttpServer http;
  int64_t created = int64_t(std::time(nullptr));

  Impl(ZayaModel& m, const Tokenizer& t, const ServeOptions& o)
      : opt(o),
        tokenizer(t),
        engine(m, engine_limits(m, o)),
        model_vocab(m.config().vocab_size),
        completions(engine, tokenizer, opt, model_vocab, flight, state, metrics),
        http(http_limits(o)) {
    http.set_error_body(error_body);
    http.set_response_observer([this](int status) { metrics.response(status); });
    http.route("GET", "/metrics", [this](const HttpRequest&, HttpResponse& res) {
      res.set_content(metrics.text(engine.running(), engine.queued()),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
    http.route("POST", "/v1/completions",
               [this](const HttpRequest& rq, HttpResponse& res) { completions(rq, res); });
    http.route("GET", "/v1/models", [this](const HttpRequest&, HttpResponse& res) { models(res); });
    http.route("POST", "/tokenize", [this](const HttpRequest& rq, HttpResponse& res) {
      tokenizer_call(res, [&](const TokenizerEndpoints& e) { return e.tokenize(rq.body); });
    });
    http.route("POST", "/detokenize", [this](const HttpRequest& rq, HttpResponse& res) {
      tokenizer_call(res, [&](const TokenizerEndpoints& e) { return e.detokenize(rq.body); });
    });
    http.route("GET", "/tokenizer_info", [this](const HttpRequest&, HttpResponse& res) {
      tokenizer_call(res, [&](const TokenizerEndpoints& e) { return e.info(); });
    });
    http.route("GET", "/health", [this](const HttpRequest&, HttpResponse& res) { health(res); });
  }

  void models(HttpResponse& res) const {
    res.set_content(dump(json{{"object", "list"},
                              {"data",
                               {{{"id", opt.model_name},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "zaya"}}}}}),
                    "application/json");
  }

  void health(HttpResponse& res) const {
    const bool draining = state.draining;
    res.status = draining ? 503 : 200;
    res.set_content(dump(json{{"status", draining ? "draining" : "ok"},
                              {"running", engine.running()},
                              {"queued", engine.queued()}}),
                    "application/json");
  }

  // Answers with what `call` returns, or its ApiError.
  template <typename Call>
  void tokenizer_call(HttpResponse& res, Call call) const {
    try {
      res.set_content(
          dump(tokenizer.use([&](const Tokenizer& tok) {
            return call(TokenizerEndpoints{tok, opt.model_name, engine.context(), model_vocab});
          })),
          "application/json");
    } catch (const ApiError& e) {
      res.status = e.status;
      res.set_content(dump(e.body()), "application/json");
    }
  }
};

OpenAiServer::OpenAiServer(ZayaModel& model, const Tokenizer& tokenizer,
                           const ServeOptions& options)
    : impl_(std::make_unique<Impl>(model, tokenizer, options)) {}

OpenAiServer::~OpenAiServer() = default;

int OpenAiServer::bind() {
  return impl_->http.bind(impl_->opt.host, impl_->opt.port);
}

void OpenAiServer::run(const std::function<void()>& on_listening) {
  impl_->engine.start();
  // Returns after stop(), once the answering threads have finished every request in flight; the
  // engine keeps decoding for them until then. It throws when the threads that answer cannot be
  // started; then nothing was said to be listening.
  std::exception_ptr failed;
  try {
    impl_->http.run(on_listening);
  } catch (...) {
    failed = std::current_exception();
  }
  impl_->engine.stop();
  if (failed) std::rethrow_exception(failed);
}

void OpenAiServer::stop() {
  // New requests get 503 from here on; once the requests in flight have sent their last byte the
  // listening socket closes.
  Impl& im = *impl_;
  im.state.draining = true;
  if (!im.flight.wait_idle(std::chrono::seconds(im.opt.drain_timeout_s))) {
    std::fprintf(
        stderr, "zaya serve: %d requests still in flight after --drain-timeout %d s: ending them\n",
        im.flight.count(), im.opt.drain_timeout_s);
    im.state.aborting = true;
    im.engine.end_live("");
    im.flight.wait_idle(std::chrono::seconds(5));
  }
  im.http.stop_connections();
  im.http.stop();
}

int OpenAiServer::in_flight() const {
  return impl_->flight.count();
}

}  // namespace zaya::serve
