#include "serve/completion_channel.h"

#include <ctime>

#include "serve/completion_request.h"

namespace zaya::serve {

using nlohmann::json;

bool stream_events(Channel& ch, const StreamReply& r, const std::string& model_name,
                   const std::atomic<bool>& aborting, EventSink& sink) {
  const auto event = [&](const json& j) {
    const std::string s = "data: " + dump(j) + "\n\n";
    return sink.write(s);
  };
  const auto chunk = [&](const std::string& text, const json& finish) {
    return json{
        {"id", r.id},
        {"object", "text_completion"},
        {"created", int64_t(std::time(nullptr))},
        {"model", model_name},
        {"choices",
         {{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}}}}};
  };
  std::string text;
  bool done;
  {
    std::unique_lock<std::mutex> lock(ch.m);
    ch.cv.wait(lock, [&] { return ch.done || !ch.text.empty() || aborting; });
    if (aborting && !ch.done) {
      ch.cancelled = true;  // the drain deadline passed: the stream ends here, cut short
      return false;
    }
    if (!ch.error.empty()) {
      const std::string e =
          "data: " +
          dump(ApiError(500, "the request failed: " + ch.error, {}, "server_error").body()) +
          "\n\n";
      sink.write(e);
      return false;
    }
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
    ok = sink.write(last);
  }
  r.log(ch, "200 (stream)");
  if (ok) sink.done();
  return ok;
}

}  // namespace zaya::serve
