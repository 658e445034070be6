// What a request's HTTP thread and the engine thread share (`Channel`), and the server-sent
// events of a streamed completion read from it (zaya serve, openai_server.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "infer/text_stream.h"
#include "serve/http_message.h"
#include "serve/logprobs.h"

namespace zaya::serve {

// What the engine thread hands a request's HTTP thread: settled text as it comes, then the end.
struct Channel {
  uint64_t id = 0;  // among the engine host's live requests (engine_host.h)
  std::mutex m;
  std::condition_variable cv;
  std::string text;  // settled, not yet taken by the HTTP thread
  bool done = false;
  std::string finish_reason;  // OpenAI's: "stop" (eos or a stop string) or "length"
  std::string error;          // what failed inside the request (then it is answered 500)
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

// JSON as sent: invalid UTF-8 (a text cut inside a sequence) becomes U+FFFD.
inline std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// What a streamed answer needs besides its channel: its id, its prompt's length (for the
// usage), when it came (for the log line), and whether the client asked for the usage.
struct StreamReply {
  std::string id;
  size_t prompt_tokens;
  std::chrono::steady_clock::time_point t0;
  bool include_usage;
  nlohmann::json usage(size_t completion) const {
    return nlohmann::json{{"prompt_tokens", prompt_tokens},
                          {"completion_tokens", completion},
                          {"total_tokens", prompt_tokens + completion}};
  }
  void log(const Channel& c, const char* how) const {
    std::fprintf(stderr,
                 "zaya serve: POST /v1/completions %s: %zu prompt tokens, %zu generated (%s), "
                 "first token %.1f ms, %.2f s in all\n",
                 how, prompt_tokens, c.completion_tokens, c.finish_reason.c_str(), c.ttft_s * 1e3,
                 seconds_since(t0));
  }
};

// One call of the stream's content provider: the text settled since the last call as an
// event, then at the end the finish, the usage when asked for, and [DONE]. False when the
// client went away (the engine then ends the request) or the stream is over.
// The drain deadline (`aborting`) ends the stream cut short; an error in the request ends it
// with an error event.
bool stream_events(Channel& ch, const StreamReply& r, const std::string& model_name,
                   const std::atomic<bool>& aborting, EventSink& sink);

}  // namespace zaya::serve
