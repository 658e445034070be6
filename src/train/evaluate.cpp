#include "train/evaluate.h"

#include <cmath>
#include <map>
#include <vector>

#include "core/error.h"
#include "data/loader.h"
#include "dist/communicator.h"
#include "dist/rank_sum.h"
#include "model/zaya_model.h"

namespace zaya {

EvalResult evaluate(ZayaModel& model, const DataLoader& loader, int seq_len, int windows,
                    int micro_batch, dist::Communicator* comm) {
  const int world = comm == nullptr ? 1 : comm->world_size();
  const int rank = comm == nullptr ? 0 : comm->rank();
  std::vector<int32_t> window(size_t(seq_len) + 1), tokens, targets;
  std::map<int32_t, int64_t> counts;  // of every window's targets, on every rank (cheap)
  double sums[2] = {0, 0};            // loss·tokens and tokens of this rank's windows
  std::vector<std::vector<int32_t>> batch;
  auto flush = [&] {
    if (batch.empty()) return;
    const int B = int(batch.size());
    tokens.assign(size_t(B) * seq_len, 0);
    targets.assign(size_t(B) * seq_len, 0);
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < seq_len; ++s) {
        tokens[size_t(b) * seq_len + s] = batch[b][s];
        targets[size_t(b) * seq_len + s] = batch[b][s + 1];
      }
    // With a context group, the model computes this rank's chunks of each window.
    const double l = model.forward(tokens, targets, B, seq_len);
    sums[0] += l * double(model.loss_count());
    sums[1] += double(model.loss_count());
    batch.clear();
  };
  int64_t all_tokens = 0;
  for (int src = 0; src < loader.num_sources(); ++src) {
    const int64_t n = std::min<int64_t>(windows, loader.val_windows(src, seq_len));
    for (int64_t i = 0; i < n; ++i) {
      loader.val_sample(src, i, window);
      for (int s = 1; s <= seq_len; ++s) ++counts[window[s]];
      all_tokens += seq_len;
      if (i % world != rank) continue;
      batch.push_back(window);
      if (int(batch.size()) == micro_batch) flush();
    }
  }
  flush();
  dist::sum_over_ranks(comm, sums);
  ZAYA_CHECK(sums[1] > 0, "evaluation: the validation split has no window of ", seq_len + 1,
             " tokens; prepare data with a larger --val-fraction or use a shorter seq_len");
  EvalResult r;
  r.loss = sums[0] / sums[1];
  r.tokens = int64_t(sums[1]);
  for (const auto& [tok, c] : counts) {
    const double p = double(c) / double(all_tokens);
    r.unigram -= p * std::log(p);
  }
  return r;
}

}  // namespace zaya
