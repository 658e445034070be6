// The engine's limits (issue 39): --max-batch requests decode and --max-queue more wait, whatever
// the engine's thread has or has not admitted yet. Each row of the table in
// docs/commands/serve.md ("Queue semantics") is one case here: requests submitted at once (before
// any tick, as a burst reaches the server), how many are taken, then how many decode and wait.
#include <gtest/gtest.h>

#include <vector>

#include "decoder_test_util.h"
#include "infer/engine.h"

namespace zaya {
namespace {

struct Row {
  int max_batch;
  size_t max_queue;
  int burst;     // requests submitted at once
  int taken;     // submit() returned true
  int decoding;  // after one tick
  size_t waiting;
};

EngineRequest request(int i) {
  EngineRequest rq;
  rq.prompt = {int32_t(1 + i % 7), 3, 5};
  rq.opt.max_new_tokens = 4;
  return rq;
}

TEST(EngineLimits, TheBatchDecodesAndTheQueueWaits) {
  ZayaModel model = test::perturbed_tiny(3);
  const Row rows[] = {
      {4, 8, 14, 12, 4, 8},  // 14 against 4 + 8: 2 refused (the filer's case admitted 9)
      {4, 0, 4, 4, 4, 0},    // no queue: the batch is still taken whole
      {4, 0, 6, 4, 4, 0},    // ... and only what is beyond it refused
      {1, 1, 3, 2, 1, 1},   {2, 5, 3, 3, 2, 1},  // fewer than the limits: all taken
  };
  for (const Row& r : rows) {
    EngineLimits limits;
    limits.decoder.max_sequences = r.max_batch;
    limits.decoder.capacity = 16;
    limits.max_queue = r.max_queue;
    InferenceEngine engine(model, limits);
    int taken = 0;
    for (int i = 0; i < r.burst; ++i) taken += engine.submit(request(i)) ? 1 : 0;
    const std::string row = "--max-batch " + std::to_string(r.max_batch) + " --max-queue " +
                            std::to_string(r.max_queue) + ", " + std::to_string(r.burst) +
                            " at once";
    EXPECT_EQ(taken, r.taken) << row;
    engine.tick();
    EXPECT_EQ(engine.running(), r.decoding) << row;
    EXPECT_EQ(engine.queued(), r.waiting) << row;
    while (engine.tick()) {
    }
    EXPECT_EQ(engine.running(), 0) << row;
  }
}

// --max-queue 0 on an idle server: requests one at a time are all taken (every one got 429
// before); and a slot freed by a finished request takes the next.
TEST(EngineLimits, NoQueueStillServesOneAtATime) {
  ZayaModel model = test::perturbed_tiny(3);
  EngineLimits limits;
  limits.decoder.max_sequences = 1;
  limits.decoder.capacity = 16;
  limits.max_queue = 0;
  InferenceEngine engine(model, limits);
  int done = 0;
  for (int i = 0; i < 3; ++i) {
    EngineRequest rq = request(i);
    rq.on_done = [&](const EngineResult&) { ++done; };
    ASSERT_TRUE(engine.submit(std::move(rq))) << "request " << i;
    EXPECT_FALSE(engine.submit(request(9))) << "a second one beside request " << i;
    while (engine.tick()) {
    }
  }
  EXPECT_EQ(done, 3);
}

}  // namespace
}  // namespace zaya
