// The public task layouts (task_file.h) one JSON object at a time: which layout an object's fields
// name, and the item lm-evaluation-harness's task config makes of it.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "eval/task_file.h"

namespace zaya {

// The layout whose fields `doc` has, or nullopt.
std::optional<TaskLayout> detect_layout(const nlohmann::json& doc);

// Throws naming `where` ("FILE:LINE") and the field when one is missing, of the wrong type or out
// of range.
TaskItem item_from_json(TaskLayout layout, const nlohmann::json& doc, const std::string& where);

// lm-eval's HellaSwag preprocessing: strip, " [title]" → ". ", drop "[...]" spans, "  " → " ".
std::string hellaswag_preprocess(std::string text);

}  // namespace zaya
