// Benchmark tasks scored on a model: a task file read, every prompt of its first items split and
// tokenized by lm-evaluation-harness's rules (eval/context_split.h), then every choice scored on
// the decoder (infer/continuation_scorer.h). `zaya eval --tasks` and the evaluation during
// training (train/train_tasks.h) both run through here.
//
// Under several ranks item i is scored by rank i mod world and every rank then holds every item's
// scores. A choice's log-likelihood does not depend on which other sequences share its decode
// steps (infer/batch_decoder.h), so the scores are bitwise those of one rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/task_file.h"
#include "eval/task_metrics.h"
#include "infer/continuation_scorer.h"
#include "tokenizer/tokenizer.h"

namespace zaya {

class ZayaModel;
namespace dist {
class Communicator;
}

struct TaskSettings {
  std::string format;  // a layout name, or empty: detected per file
  int limit = 0;       // items per task (0: all)
  int shots = 0;
  uint64_t seed = 1234;
  int batch = 32;                                     // sequences decoded together
  int64_t max_record_bytes = kDefaultMaxRecordBytes;  // the longest line of a task file
};

// A task with the token ids of every choice of its first `items` items, in item order.
struct PreparedTask {
  Task task;
  size_t items = 0;
  std::vector<ContinuationRequest> requests;  // item 0's choices, then item 1's, ...
};

// Reads and tokenizes; errors name the file, the line and the field (or the choice).
PreparedTask prepare_task(const std::string& path, const TaskSettings& settings,
                          const Tokenizer& tokenizer, int32_t prefix_token);

// Every item's per-choice scores, on every rank. Collective when comm has several ranks.
std::vector<ChoiceScores> score_task(ZayaModel& model, const PreparedTask& task, int batch,
                                     dist::Communicator* comm);

}  // namespace zaya
