// The texts scored for one task item, as lm-evaluation-harness builds them: the description, then
// K few-shot examples (other items of the same file, answered) separated by a blank line, a blank
// line, and the item's query; the continuation follows as the layout made it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "eval/task_file.h"

namespace zaya {

// The K items other than `index` that serve as its examples: a pure function of (seed, index),
// so the prompts do not depend on --limit or on which process scores the item. Throws when the
// file has fewer than K other items.
std::vector<size_t> fewshot_examples(const Task& task, size_t index, int shots, uint64_t seed);

// Per choice: (context, continuation).
std::vector<std::pair<std::string, std::string>> item_prompts(const Task& task, size_t index,
                                                              int shots, uint64_t seed);

}  // namespace zaya
