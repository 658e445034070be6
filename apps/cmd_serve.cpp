// zaya serve: the OpenAI completions API over the continuous-batching engine. SIGTERM or Ctrl-C
// answers new requests 503, finishes every request in flight, closes the socket and exits 0.
#include "cmd_serve.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <thread>

#include "backend/device_select.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "infer/batch_decoder.h"
#include "inference_model.h"
#include "serve/openai_server.h"

namespace zaya::cli {

namespace {

struct ServeArgs {
  std::string model, tokenizer;
  std::string device = "auto";
  Precision precision = Precision::kFp32;
  serve::ServeOptions opt;
};

// ZAYA_SERVE_TEST_FAULT=request:SEED or step:SEED: a test hook that makes the engine fail the
// completion with that seed (serve::ServeOptions::test_fault; docs/commands/serve.md).
void read_test_fault(serve::ServeOptions& opt) {
  const char* env = std::getenv("ZAYA_SERVE_TEST_FAULT");
  if (env == nullptr || *env == 0) return;
  const std::string v = env;
  const size_t colon = v.find(':');
  const std::string kind = v.substr(0, colon);
  uint64_t seed = 0;
  const char* end = v.data() + v.size();
  const auto [ptr, ec] = std::from_chars(v.data() + std::min(colon + 1, v.size()), end, seed);
  const bool ok = colon != std::string::npos && (kind == "request" || kind == "step") &&
                  colon + 1 < v.size() && ptr == end && ec == std::errc{};
  ZAYA_CHECK(ok, "ZAYA_SERVE_TEST_FAULT (a test hook): expected request:SEED or step:SEED, got '",
             v, "'");
  opt.test_fault = kind == "step" ? serve::ServeOptions::TestFault::kStep
                                  : serve::ServeOptions::TestFault::kRequest;
  opt.test_fault_seed = seed;
  std::fprintf(stderr,
               "zaya serve: warning: ZAYA_SERVE_TEST_FAULT=%s: a test hook; completions with seed "
               "%llu fail on purpose\n",
               v.c_str(), (unsigned long long)seed);
}

// Each open connection is a file descriptor: the soft limit is raised toward the hard one for
// --max-connections plus the process's own files (the model, pipes, the standard streams), and
// where the hard limit is lower the cap comes down to fit, saying so.
void fit_connections_to_file_limit(serve::ServeOptions& opt) {
  constexpr rlim_t kOwnFiles = 256;
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return;
  const rlim_t wanted = rlim_t(opt.max_connections) + kOwnFiles;
  if (files.rlim_cur < wanted) {
    files.rlim_cur = files.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, files.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &files);
    ::getrlimit(RLIMIT_NOFILE, &files);
  }
  if (files.rlim_cur < wanted) {
    const size_t fits = files.rlim_cur > kOwnFiles + 8 ? size_t(files.rlim_cur - kOwnFiles) : 8;
    std::fprintf(stderr,
                 "zaya serve: --max-connections %zu lowered to %zu: the open-file limit is %llu "
                 "(ulimit -n; raise its hard limit for more)\n",
                 opt.max_connections, fits, (unsigned long long)files.rlim_cur);
    opt.max_connections = fits;
  }
}

}  // namespace

Runner add_serve_commands(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* sv = app.add_subcommand(
      "serve",
      "Serve a model over HTTP with the OpenAI completions API (POST /v1/completions, streaming "
      "included; GET /v1/models, GET /health); concurrent requests are decoded together. SIGTERM "
      "or Ctrl-C answers new requests 503, finishes those in flight, then exits 0");
  sv->add_option("--model", a->model,
                 "HF model directory, zaya checkpoint or a run's ckpt/ root (as zaya generate)")
      ->required();
  sv->add_option("--tokenizer", a->tokenizer,
                 "tokenizer.json (default: the model directory's tokenizer.json)");
  sv->add_option("--device", a->device, kDeviceFlagHelp)->capture_default_str();
  add_mode_option(*sv, "--precision", a->precision, precision_names(), kInferencePrecisionHelp);
  sv->add_option("--host", a->opt.host, "address to listen on")->capture_default_str();
  sv->add_option("--port", a->opt.port, "port to listen on (0: any free port, printed)")
      ->check(IntIn(0, 65535))
      ->capture_default_str();
  sv->add_option("--model-name", a->opt.model_name,
                 "the model id clients send as \"model\" (default: the model directory's name)");
  sv->add_option("--max-batch", a->opt.max_batch,
                 "requests decoded together; more wait in the queue (each needs cache for "
                 "--context positions)")
      ->check(IntIn(1, 1024))
      ->capture_default_str();
  sv->add_option("--max-queue", a->opt.max_queue,
                 "requests that may wait beyond --max-batch; more get 429")
      ->check(IntIn(0, 100000))
      ->capture_default_str();
  sv->add_option("--context", a->opt.context,
                 "positions per request, prompt + max_tokens (default: the model's max_seq_len); "
                 "a longer request gets 400 context_length_exceeded")
      ->check(IntIn(1, int64_t(1) << 30));
  sv->add_option("--max-tokens-limit", a->opt.max_tokens_limit,
                 "the largest max_tokens a request may ask for (default: the context)")
      ->check(IntIn(1, 1 << 30));
  sv->add_option("--max-connections", a->opt.max_connections,
                 "connections open at once; their requests are read by one thread, so a slow "
                 "client holds no thread; beyond that a connection gets 503 at once")
      ->check(IntIn(8, 65536))
      ->capture_default_str();
  sv->add_option("--http-threads", a->opt.http_threads,
                 "threads answering complete requests (a streamed completion holds one to its "
                 "end), started when first needed; a complete request waits for a free one")
      ->check(IntIn(4, 4096))
      ->capture_default_str();
  sv->add_option("--drain-timeout", a->opt.drain_timeout_s,
                 "on SIGTERM, seconds the requests in flight may take to finish; the ones left "
                 "are then ended (503, or a stream cut short) and the process exits 0 within "
                 "this plus 10 s")
      ->check(IntIn(0, 3600))
      ->capture_default_str();

  return [=]() -> int {
    if (!*sv) return kNotMine;
    ZAYA_CHECK(dist::make_communicator()->world_size() == 1,
               "zaya serve runs as one process (start it without mpirun/srun); for a long context "
               "over several ranks use zaya generate under mpirun (tree attention)");
    // SIGTERM and SIGINT go to one thread that stops the server; blocked here before any other
    // thread starts, so every thread inherits the mask.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    const InferenceModel im = load_inference_model(a->model, a->tokenizer, a->device, a->precision);
    serve::ServeOptions opt = a->opt;
    read_test_fault(opt);
    fit_connections_to_file_limit(opt);
    if (opt.model_name.empty()) opt.model_name = default_model_name(im);
    const ModelConfig& c = im.loaded.model->config();
    const int64_t context = opt.context > 0 ? opt.context : c.max_seq_len;
    ZAYA_CHECK(context <= c.max_seq_len, "--context ", context, " exceeds the model's max_seq_len ",
               c.max_seq_len);
    const double cache_bytes =
        double(BatchDecoder::cache_bytes_per_token(c)) * double(context) * opt.max_batch;
    std::unique_ptr<serve::OpenAiServer> server_ptr;
    try {
      server_ptr = std::make_unique<serve::OpenAiServer>(*im.loaded.model, *im.tokenizer, opt);
    } catch (const std::bad_alloc&) {
      ZAYA_FAIL("zaya serve: the cache for --max-batch ", opt.max_batch, " requests of --context ",
                context, " positions needs ", cache_bytes / 1073741824.0,
                " GiB, more than this machine can allocate; lower --max-batch or --context");
    }
    serve::OpenAiServer& server = *server_ptr;
    const int port = server.bind();
    std::fprintf(stderr,
                 "zaya serve: model '%s' (%s), up to %d requests decoded together and %zu waiting, "
                 "%lld-token context; cache %lld bytes per token (%.1f MiB reserved); on %s\n",
                 opt.model_name.c_str(), im.loaded.path.c_str(), opt.max_batch, opt.max_queue,
                 (long long)context, (long long)BatchDecoder::cache_bytes_per_token(c),
                 cache_bytes / 1048576.0, im.device.c_str());
    const int drain_s = opt.drain_timeout_s;
    std::thread([&server, stop_signals, drain_s] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      std::fprintf(stderr,
                   "zaya serve: %s: new requests get 503; finishing the %d requests in flight "
                   "(at most %d s)\n",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT", server.in_flight(), drain_s);
      // The stated bound: whatever holds the drain up, the process ends within it.
      std::thread([drain_s] {
        std::this_thread::sleep_for(std::chrono::seconds(drain_s + 10));
        std::fprintf(stderr, "zaya serve: not stopped %d s after the signal: exiting now\n",
                     drain_s + 10);
        std::_Exit(1);
      }).detach();
      server.stop();
    }).detach();
    // "listening" only once the threads that answer are running.
    server.run([&] {
      std::printf("zaya serve: listening on http://%s:%d\n", opt.host.c_str(), port);
      std::fflush(stdout);
    });
    std::fprintf(stderr, "zaya serve: stopped\n");
    return 0;
  };
}

}  // namespace zaya::cli
