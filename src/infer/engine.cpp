#include "infer/engine.h"

#include "core/clock.h"
#include "core/error.h"
#include "infer/sampling.h"

namespace zaya {

InferenceEngine::InferenceEngine(ZayaModel& model, const EngineLimits& limits,
                                 dist::Communicator* comm)
    : decoder_(model, limits.decoder, comm), limits_(limits) {}

namespace {
// The positions a request may fill: its prompt and every token it may draw (what it reserves).
int64_t positions_of(const EngineRequest& rq) {
  return int64_t(rq.prompt.size()) + rq.opt.max_new_tokens;
}
}  // namespace

bool InferenceEngine::submit(EngineRequest rq) {
  const int64_t p = int64_t(rq.prompt.size());
  ZAYA_CHECK(p >= 1, "the prompt has no tokens");
  ZAYA_CHECK(rq.opt.max_new_tokens >= 1, "max_tokens must be >= 1, got ", rq.opt.max_new_tokens);
  ZAYA_CHECK(positions_of(rq) <= decoder_.capacity(), "the prompt has ", p,
             " tokens and max_tokens is ", rq.opt.max_new_tokens, ": together more than the ",
             decoder_.capacity(), "-token context");
  validate_sampling(rq.opt.sampling);
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t holds = size_t(limits_.decoder.max_sequences) + limits_.max_queue;
  if (queue_.size() + admitted_ >= holds) return false;
  queue_.push_back(Waiting{std::move(rq), Clock::now()});
  work_.notify_one();
  return true;
}

size_t InferenceEngine::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

int InferenceEngine::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return int(admitted_);
}

void InferenceEngine::wait_for_work(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  work_.wait_for(lock, timeout, [&] { return !queue_.empty(); });
}

bool InferenceEngine::draw(Running& r) {
  const GenerateOptions& opt = r.rq.opt;
  if (r.rq.on_draw_logits) r.rq.on_draw_logits(decoder_.logits(r.id));
  const int32_t next = sample_next(drawable_logits(decoder_.logits(r.id), opt), r.context,
                                   opt.sampling, uint64_t(r.context.size()));
  if (r.result.tokens.empty()) r.first_token = Clock::now();
  r.context.push_back(next);
  r.result.tokens.push_back(next);
  r.pending = next;
  const char* end = end_of_generation(next, int(r.result.tokens.size()), opt, r.rq.on_token);
  if (end) r.result.finish_reason = end;
  return end == nullptr;
}

void InferenceEngine::finish(Running& r) {
  const auto now = Clock::now();
  r.result.ttft_seconds = std::chrono::duration<double>(r.first_token - r.submitted).count();
  r.result.decode_seconds = std::chrono::duration<double>(now - r.first_token).count();
  decoder_.remove(r.id);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --admitted_;
  }
  if (r.rq.on_done) r.rq.on_done(r.result);
}

bool InferenceEngine::tick() {
  // 1. Admit in order of arrival while the head of the queue fits (no overtaking: a long request
  //    is not starved by short ones).
  for (;;) {
    Waiting w;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty() || !decoder_.can_add(positions_of(queue_.front().rq))) break;
      w = std::move(queue_.front());
      queue_.pop_front();
      ++admitted_;
    }
    Running r;
    r.submitted = w.submitted;
    r.result.queue_seconds = seconds_since(w.submitted);
    r.rq = std::move(w.rq);
    r.context = r.rq.prompt;
    r.id = decoder_.add(r.rq.prompt, positions_of(r.rq));
    if (r.rq.on_prompt_logits) r.rq.on_prompt_logits(decoder_.prefill_logits());
    if (draw(r)) {
      running_.push_back(std::move(r));
    } else {
      finish(r);
    }
  }
  // 2. One token for every running request, in one batched step.
  if (!running_.empty()) {
    std::vector<int> ids;
    std::vector<int32_t> tokens;
    for (const Running& r : running_) {
      ids.push_back(r.id);
      tokens.push_back(r.pending);
    }
    const auto t0 = Clock::now();
    decoder_.step(ids, tokens);
    decode_seconds_ += seconds_since(t0);
    decoded_tokens_ += int64_t(ids.size());
    std::vector<Running> still;
    for (Running& r : running_) {
      if (draw(r)) {
        still.push_back(std::move(r));
      } else {
        finish(r);
      }
    }
    running_ = std::move(still);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return !queue_.empty() || !running_.empty();
}

}  // namespace zaya
