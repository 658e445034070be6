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
#include <span>
#include <string>
#include <vector>

#include "eval/task_file.h"
#include "eval/task_metrics.h"
#include "infer/continuation_scorer.h"
#include "tokenizer/tokenizer.h"

namespace zaya {

class ZayaModel;
struct ModelConfig;
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

// Refuses a task that a model of config `c` cannot score, before anything is scored: a choice whose
// continuation alone is longer than the model's context (a longer context is cut on the left, as
// lm-eval cuts it). The error names the file, the line, the choice, its tokens, the context, and
// the items before it (the 'limit' that would stop short of it).
void check_task_fits_context(const PreparedTask& task, const ModelConfig& c);

// Scoring `task` with `batch` sequences at once: the sequences the decoder holds (no more than
// the task's choices) and the least memory it takes for them (BatchDecoder::least_memory_bytes).
struct ScoringMemory {
  int sequences = 0;
  int64_t capacity = 0;  // positions of the longest request, up to the model's context
  int64_t bytes = 0;
};
ScoringMemory scoring_memory(const PreparedTask& task, const ModelConfig& c, int batch);

// Refuses a `batch` (named `batch_field`, e.g. "'eval.batch'" or "--batch") whose decoder would
// not fit in `memory_bytes` for one of `tasks`, with the largest batch that fits.
void check_scoring_memory(std::span<const PreparedTask> tasks, const ModelConfig& c, int batch,
                          int64_t memory_bytes, const std::string& batch_field);

// Every item's per-choice scores, on every rank. Collective when comm has several ranks.
std::vector<ChoiceScores> score_task(ZayaModel& model, const PreparedTask& task, int batch,
                                     dist::Communicator* comm);

}  // namespace zaya
