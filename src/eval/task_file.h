// Benchmark task files for `zaya eval --tasks`: JSON lines in the public layouts, each turned into
// the texts lm-evaluation-harness scores for it (its task configs' doc_to_text, doc_to_choice and
// doc_to_target, restated in task_layouts.cpp).
//
// An item is a list of (query, continuation) pairs, one per choice: the continuation is what is
// scored after the few-shot prefix + query. Multiple-choice layouts share one query and differ in
// the continuation (" " + choice); Winogrande differs in the query (the sentence up to the blank,
// filled by each option) and shares the continuation ("partial scoring"); LAMBADA has one pair
// (the text without its last word; " " + that word).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/record_reader.h"

namespace zaya {

enum class TaskLayout { kHellaSwag, kArc, kMmlu, kPiqa, kWinogrande, kLambada, kPlain };

struct TaskItem {
  int line = 0;                            // 1-based line of the file
  std::vector<std::string> queries;        // per choice (identical but for Winogrande)
  std::vector<std::string> continuations;  // per choice, the target delimiter included
  std::vector<std::string> choices;  // lm-eval's doc_to_choice: their lengths normalise acc_norm
  int gold = 0;
  std::string description;  // before the few-shot examples (MMLU: the subject's sentence)
  // The item answered, as a few-shot example: the gold query and its continuation.
  std::string answered() const { return queries[size_t(gold)] + continuations[size_t(gold)]; }
};

struct Task {
  std::string name;  // the file's stem
  std::string path;
  TaskLayout layout = TaskLayout::kPlain;
  std::vector<TaskItem> items;
  bool cloze() const { return layout == TaskLayout::kLambada; }  // acc = greedy match; perplexity
};

// "hellaswag", "arc", "mmlu", "piqa", "winogrande", "lambada", "plain".
std::string_view layout_name(TaskLayout layout);
// Throws on an unknown name, listing the known ones.
TaskLayout parse_layout(std::string_view name);

// Reads every line (blank lines skipped; a .gz or .zst file is decompressed); the layout is
// `forced` or detected from the first item's fields, and every item must have it. Errors name the
// file, the line and the field; a line longer than max_record_bytes or nested deeper than
// kMaxJsonDepth is an error, as is a path that is not a regular file.
Task read_task_file(const std::string& path, std::optional<TaskLayout> forced = std::nullopt,
                    int64_t max_record_bytes = kDefaultMaxRecordBytes);

}  // namespace zaya
