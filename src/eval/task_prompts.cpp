#include "eval/task_prompts.h"

#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace zaya {

std::vector<size_t> fewshot_examples(const Task& task, size_t index, int shots, uint64_t seed) {
  const size_t n = task.items.size();
  ZAYA_CHECK(shots >= 0 && size_t(shots) < n, "--shots ", shots, ": ", task.path, " has ", n,
             " items, so at most ", n - 1, " other items can serve as examples");
  std::vector<size_t> pool(n - 1);
  std::iota(pool.begin(), pool.end(), size_t(0));
  for (size_t& i : pool) i += i >= index ? 1 : 0;
  // A partial Fisher-Yates shuffle driven by (seed, item).
  const Philox rng(seed, index);
  for (size_t k = 0; k < size_t(shots); ++k) {
    const size_t pick = k + size_t(rng.words(k)[0]) % (pool.size() - k);
    std::swap(pool[k], pool[pick]);
  }
  pool.resize(size_t(shots));
  return pool;
}

std::vector<std::pair<std::string, std::string>> item_prompts(const Task& task, size_t index,
                                                              int shots, uint64_t seed) {
  const TaskItem& item = task.items[index];
  std::string prefix = item.description;
  for (const size_t ex : fewshot_examples(task, index, shots, seed))
    prefix += task.items[ex].answered() + "\n\n";
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t c = 0; c < item.queries.size(); ++c)
    out.emplace_back(prefix + item.queries[c], item.continuations[c]);
  return out;
}

}  // namespace zaya
