#include "infer/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace zaya {

void validate_sampling(const SamplingParams& p) {
  ZAYA_CHECK(std::isfinite(p.temperature) && p.temperature >= 0, "temperature must be >= 0, got ",
             p.temperature);
  ZAYA_CHECK(p.top_k >= 0, "top_k must be >= 0, got ", p.top_k);
  ZAYA_CHECK(std::isfinite(p.top_p) && p.top_p > 0 && p.top_p <= 1, "top_p must be in (0, 1], got ",
             p.top_p);
  ZAYA_CHECK(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0,
             "repetition_penalty must be > 0, got ", p.repetition_penalty);
}

int32_t sample_next(std::span<const float> logits_in, std::span<const int32_t> context,
                    const SamplingParams& p, uint64_t position) {
  const int V = int(logits_in.size());
  ZAYA_CHECK(V > 0, "sample_next: no logits");
  std::vector<float> logits(logits_in.begin(), logits_in.end());
  if (p.repetition_penalty != 1.0f) {
    // CTRL (Keskar et al. 2019), as Hugging Face applies it: once per distinct token in context,
    // positive logits divided by the penalty, negative ones multiplied.
    std::vector<char> seen(static_cast<size_t>(V), 0);
    for (const int32_t t : context)
      if (t >= 0 && t < V && !seen[size_t(t)]) {
        seen[size_t(t)] = 1;
        float& l = logits[size_t(t)];
        l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
      }
  }
  // Candidates by logit, high to low, ties to the lower id (a total order: deterministic).
  std::vector<int> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  const auto better = [&](int a, int b) {
    return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
  };
  if (p.temperature <= 0.0f) return *std::min_element(order.begin(), order.end(), better);
  const int k = p.top_k > 0 ? std::min(p.top_k, V) : V;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
  order.resize(size_t(k));
  const double mx = logits[size_t(order[0])];
  std::vector<double> prob(static_cast<size_t>(k));
  double total = 0;
  for (int i = 0; i < k; ++i)
    total += prob[size_t(i)] =
        std::exp((double(logits[size_t(order[size_t(i)])]) - mx) / double(p.temperature));
  if (p.top_p < 1.0f) {
    // Nucleus: the smallest prefix whose probability reaches top_p (at least one token).
    double mass = 0;
    int keep = 0;
    while (keep < k && mass < double(p.top_p) * total) mass += prob[size_t(keep++)];
    prob.resize(size_t(std::max(keep, 1)));
    total = std::accumulate(prob.begin(), prob.end(), 0.0);
  }
  const Philox rng(p.seed, hash_name("sampling"));
  double u = rng.uniform(position) * total;
  for (size_t i = 0; i < prob.size(); ++i)
    if ((u -= prob[i]) <= 0.0) return order[i];
  return order[prob.size() - 1];
}

}  // namespace zaya
