#include "eval/task_file.h"

#include <array>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "eval/task_layouts.h"
#include "io/input_files.h"
#include "io/json_limits.h"

namespace zaya {

namespace {

constexpr std::array<std::pair<TaskLayout, std::string_view>, 7> kLayoutNames = {{
    {TaskLayout::kHellaSwag, "hellaswag"},
    {TaskLayout::kArc, "arc"},
    {TaskLayout::kMmlu, "mmlu"},
    {TaskLayout::kPiqa, "piqa"},
    {TaskLayout::kWinogrande, "winogrande"},
    {TaskLayout::kLambada, "lambada"},
    {TaskLayout::kPlain, "plain"},
}};

constexpr const char* kLayoutFields =
    "hellaswag (ctx or ctx_a/ctx_b, endings, label), arc (question or question_stem, choices "
    "{text, label}, answerKey), mmlu (question, choices, answer), piqa (goal, sol1, sol2, label), "
    "winogrande (sentence, option1, option2, answer), plain (context, choices, gold), lambada "
    "(text)";

}  // namespace

std::string_view layout_name(TaskLayout layout) {
  for (const auto& [l, name] : kLayoutNames)
    if (l == layout) return name;
  return "?";
}

TaskLayout parse_layout(std::string_view name) {
  for (const auto& [l, n] : kLayoutNames)
    if (n == name) return l;
  ZAYA_FAIL("--task-format '", name, "' is not a task layout; the layouts: ", kLayoutFields);
}

Task read_task_file(const std::string& path, std::optional<TaskLayout> forced,
                    int64_t max_record_bytes) {
  require_regular_file(path, "--tasks");
  // The reader of zaya data prepare: lines bounded by max_record_bytes while they are read.
  ReadOptions options;
  options.format = InputFormat::kJsonl;
  options.max_record_bytes = max_record_bytes;
  RecordReader lines(path, options);
  Task task;
  task.path = path;
  task.name = std::filesystem::path(path).stem().string();
  std::optional<TaskLayout> layout = forced;
  Record line;
  while (lines.next(line)) {
    const int64_t n = line.line;
    const std::string where = path + ":" + std::to_string(n);
    check_json_depth(line.bytes, where);
    const nlohmann::json doc = nlohmann::json::parse(line.bytes, nullptr, false);
    ZAYA_CHECK(!doc.is_discarded(), where, ": not a JSON object (task files hold one per line)");
    if (!layout) {
      layout = detect_layout(doc);
      ZAYA_CHECK(layout.has_value(), where, ": unknown task layout: its fields match none of ",
                 kLayoutFields, " (or pass --task-format)");
    }
    TaskItem item = item_from_json(*layout, doc, where);
    item.line = int(n);
    task.items.push_back(std::move(item));
  }
  ZAYA_CHECK(!task.items.empty(), path, ": the task file has no items");
  task.layout = *layout;
  return task;
}

}  // namespace zaya
