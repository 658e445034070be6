#include "train/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace zaya {

std::vector<int32_t> generate(ZayaModel& model, std::vector<int32_t> tokens,
                              const SampleOptions& opt) {
  ZAYA_CHECK(!tokens.empty(), "generate: the prompt needs at least one token");
  const int V = int(model.config().vocab_size);
  const int max_ctx = int(model.config().max_seq_len);
  const Philox rng(opt.seed, hash_name("sampling"));
  std::vector<float> logits(V);
  std::vector<int> order(V);
  for (int n = 0; n < opt.max_new_tokens; ++n) {
    const int start = std::max(0, int(tokens.size()) - max_ctx);
    const std::vector<int32_t> ctx(tokens.begin() + start, tokens.end());
    const int S = int(ctx.size());
    model.forward(ctx, {}, 1, S);
    std::copy_n(model.logits().data() + size_t(S - 1) * V, V, logits.begin());
    int next = 0;
    if (opt.temperature <= 0.0f) {
      next = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
    } else {
      // Keep the top_k largest logits (ties by lower id), softmax at the temperature, draw.
      std::iota(order.begin(), order.end(), 0);
      const int k = opt.top_k > 0 ? std::min(opt.top_k, V) : V;
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
        return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
      });
      const float mx = logits[order[0]];
      double total = 0.0;
      std::vector<double> p(k);
      for (int i = 0; i < k; ++i)
        total += p[i] = std::exp((logits[order[i]] - mx) / opt.temperature);
      double u = rng.uniform(uint64_t(tokens.size())) * total;
      next = order[k - 1];
      for (int i = 0; i < k; ++i) {
        if ((u -= p[i]) <= 0.0) {
          next = order[i];
          break;
        }
      }
    }
    tokens.push_back(int32_t(next));
    if (next == opt.stop_token) break;
  }
  return tokens;
}

}  // namespace zaya
