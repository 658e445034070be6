#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace zaya {

double learning_rate(const OptimConfig& c, int64_t step, int64_t total_steps) {
  ZAYA_CHECK(total_steps > 0, "learning_rate: total_steps must be > 0, got ", total_steps);
  ZAYA_CHECK(step >= 0, "learning_rate: step must be >= 0, got ", step);
  ZAYA_CHECK(c.warmup_steps <= total_steps, "learning_rate: warmup_steps (", c.warmup_steps,
             ") exceeds total_steps (", total_steps, ")");
  // WSD's decay window is checked before the warm-up returns, so a bad config fails at step 0.
  const auto wsd_decay = std::max<int64_t>(1, std::llround(c.decay_fraction * double(total_steps)));
  ZAYA_CHECK(c.schedule != LrSchedule::Wsd || total_steps - wsd_decay >= c.warmup_steps,
             "learning_rate: WSD decay (", wsd_decay, " steps) overlaps the warm-up (",
             c.warmup_steps, " of ", total_steps, " steps)");
  if (step < c.warmup_steps) return c.lr * double(step) / double(c.warmup_steps);
  switch (c.schedule) {
    case LrSchedule::Constant:
      return c.lr;
    case LrSchedule::Cosine: {
      const int64_t span = total_steps - c.warmup_steps;
      if (span == 0) return c.min_lr;
      const double p = std::min(1.0, double(step - c.warmup_steps) / double(span));
      return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
    }
    case LrSchedule::Wsd: {
      const int64_t decay_start = total_steps - wsd_decay;
      if (step < decay_start) return c.lr;
      const double p = std::min(1.0, double(step - decay_start) / double(wsd_decay));
      return c.lr + (c.min_lr - c.lr) * p;
    }
  }
  ZAYA_FAIL("learning_rate: unknown schedule");
}

int64_t batch_sequences(const OptimConfig& c, int64_t step, int64_t global_sequences,
                        int64_t micro_batch) {
  ZAYA_CHECK(micro_batch > 0, "batch_sequences: micro_batch must be > 0, got ", micro_batch);
  ZAYA_CHECK(global_sequences >= micro_batch && global_sequences % micro_batch == 0,
             "batch_sequences: the global batch (", global_sequences,
             ") must be a positive multiple of the micro-batch (", micro_batch, ")");
  if (!c.batch_ramp || c.batch_ramp->ramp_steps == 0 || step >= c.batch_ramp->ramp_steps) {
    return global_sequences;
  }
  const int64_t start = std::min(c.batch_ramp->start_sequences, global_sequences);
  const int64_t linear =
      start + (global_sequences - start) * std::max<int64_t>(step, 0) / c.batch_ramp->ramp_steps;
  const int64_t rounded = (linear + micro_batch / 2) / micro_batch * micro_batch;
  return std::clamp(rounded, micro_batch, global_sequences);
}

}  // namespace zaya
