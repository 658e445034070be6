#include "eval/task_layouts.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "eval/context_split.h"

namespace zaya {

using nlohmann::json;

namespace {

const json& field(const json& doc, const char* name, const std::string& where) {
  ZAYA_CHECK(doc.contains(name), where, ": missing field '", name, "'");
  return doc[name];
}

std::string text_field(const json& doc, const char* name, const std::string& where) {
  const json& v = field(doc, name, where);
  ZAYA_CHECK(v.is_string(), where, ": field '", name, "' must be a string, got ", v.dump());
  return v.get<std::string>();
}

std::vector<std::string> text_list(const json& v, const std::string& name,
                                   const std::string& where) {
  ZAYA_CHECK(v.is_array() && !v.empty(), where, ": field '", name,
             "' must be a non-empty list of strings, got ", v.dump());
  std::vector<std::string> out;
  for (const json& s : v) {
    ZAYA_CHECK(s.is_string(), where, ": field '", name, "' must hold strings, got ", s.dump());
    out.push_back(s.get<std::string>());
  }
  return out;
}

// An index into `n` choices given as an integer or a string of digits (HellaSwag's "label").
int index_field(const json& doc, const char* name, size_t n, const std::string& where) {
  const json& v = field(doc, name, where);
  const std::string digits = v.is_string() ? v.get<std::string>() : "";
  int64_t i = -1;
  if (v.is_number_integer()) {
    i = v.get<int64_t>();
  } else if (!digits.empty() && digits.size() < 9 &&
             std::all_of(digits.begin(), digits.end(),
                         [](unsigned char c) { return std::isdigit(c); })) {
    i = std::stoll(digits);
  } else {
    ZAYA_FAIL(where, ": field '", name, "' must be a choice index, got ", v.dump());
  }
  ZAYA_CHECK(i >= 0 && i < int64_t(n), where, ": field '", name, "' = ", v.dump(),
             " is out of range: there are ", n, " choices");
  return int(i);
}

// One query, continuations " " + choice (lm-eval's default target delimiter).
TaskItem multiple_choice(std::string query, std::vector<std::string> choices, int gold) {
  TaskItem item;
  item.queries.assign(choices.size(), query);
  for (const std::string& c : choices) item.continuations.push_back(" " + c);
  item.choices = std::move(choices);
  item.gold = gold;
  return item;
}

TaskItem hellaswag(const json& doc, const std::string& where) {
  // lm-eval rebuilds the context from its halves (the second capitalised as Python's
  // str.capitalize: first letter upper, the rest lower); plain `ctx` when the halves are absent.
  std::string ctx;
  if (doc.contains("ctx_a") && doc.contains("ctx_b")) {
    std::string b = text_field(doc, "ctx_b", where);
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = char(i == 0 ? std::toupper(b[i]) : std::tolower(b[i]));
    ctx = text_field(doc, "ctx_a", where) + " " + b;
  } else {
    ctx = text_field(doc, "ctx", where);
  }
  const std::string label =
      doc.contains("activity_label") ? text_field(doc, "activity_label", where) + ": " : "";
  std::vector<std::string> endings = text_list(field(doc, "endings", where), "endings", where);
  for (std::string& e : endings) e = hellaswag_preprocess(e);
  const int gold = index_field(doc, "label", endings.size(), where);
  return multiple_choice(hellaswag_preprocess(label + ctx), std::move(endings), gold);
}

TaskItem arc(const json& doc, const std::string& where) {
  // OpenBookQA names the question 'question_stem' and its prompt is the bare question.
  const bool obqa = !doc.contains("question") && doc.contains("question_stem");
  const std::string q =
      obqa ? text_field(doc, "question_stem", where) : text_field(doc, "question", where);
  const json& choices = field(doc, "choices", where);
  ZAYA_CHECK(choices.is_object(), where, ": field 'choices' must be an object {text, label}");
  std::vector<std::string> text = text_list(field(choices, "text", where), "choices.text", where);
  const std::vector<std::string> labels =
      text_list(field(choices, "label", where), "choices.label", where);
  ZAYA_CHECK(labels.size() == text.size(), where, ": 'choices.label' has ", labels.size(),
             " entries and 'choices.text' ", text.size());
  std::string key = text_field(doc, "answerKey", where);
  key.erase(0, key.find_first_not_of(" \t"));
  const auto it = std::find(labels.begin(), labels.end(), key);
  ZAYA_CHECK(it != labels.end(), where, ": field 'answerKey' = '", key,
             "' is not one of 'choices.label'");
  return multiple_choice(obqa ? q : "Question: " + q + "\nAnswer:", std::move(text),
                         int(it - labels.begin()));
}

TaskItem mmlu(const json& doc, const std::string& where) {
  const std::vector<std::string> options =
      text_list(field(doc, "choices", where), "choices", where);
  ZAYA_CHECK(options.size() <= 26, where, ": field 'choices' has ", options.size(),
             " entries; at most 26 (A-Z) can be lettered");
  std::string q = text_field(doc, "question", where);
  q = q.substr(q.find_first_not_of(" \t\n\r") == std::string::npos
                   ? q.size()
                   : q.find_first_not_of(" \t\n\r"));
  q.resize(rstripped_length(q));
  std::vector<std::string> letters;
  for (size_t i = 0; i < options.size(); ++i) {
    letters.emplace_back(1, char('A' + i));
    q += "\n" + letters.back() + ". " + options[i];
  }
  const json& answer = field(doc, "answer", where);
  int gold = 0;
  if (answer.is_string() && answer.get<std::string>().size() == 1 &&
      std::isupper(static_cast<unsigned char>(answer.get<std::string>()[0])))
    gold = index_field(json{{"answer", answer.get<std::string>()[0] - 'A'}}, "answer",
                       options.size(), where);
  else
    gold = index_field(doc, "answer", options.size(), where);
  TaskItem item = multiple_choice(q + "\nAnswer:", letters, gold);
  if (doc.contains("subject") && doc["subject"].is_string()) {
    std::string subject = doc["subject"].get<std::string>();
    std::replace(subject.begin(), subject.end(), '_', ' ');
    item.description =
        "The following are multiple choice questions (with answers) about " + subject + ".\n\n";
  }
  return item;
}

TaskItem piqa(const json& doc, const std::string& where) {
  std::vector<std::string> sols = {text_field(doc, "sol1", where), text_field(doc, "sol2", where)};
  const int gold = index_field(doc, "label", 2, where);
  return multiple_choice(
      "Question: " + text_field(doc, "goal", where) + "\nAnswer:", std::move(sols), gold);
}

TaskItem winogrande(const json& doc, const std::string& where) {
  const std::string sentence = text_field(doc, "sentence", where);
  const size_t blank = sentence.find('_');
  ZAYA_CHECK(blank != std::string::npos, where, ": field 'sentence' has no blank '_'");
  const json& answer = field(doc, "answer", where);
  const std::string a = answer.is_string() ? answer.get<std::string>() : answer.dump();
  ZAYA_CHECK(a == "1" || a == "2", where, ": field 'answer' must be \"1\" or \"2\", got ",
             answer.dump());
  std::string rest = sentence.substr(blank + 1);
  rest.erase(0, rest.find_first_not_of(" \t\n\r"));
  rest.resize(rstripped_length(rest));
  TaskItem item;
  for (const char* option : {"option1", "option2"}) {
    item.queries.push_back(sentence.substr(0, blank) + text_field(doc, option, where));
    item.continuations.push_back(" " + rest);
  }
  item.choices = item.queries;
  item.gold = a == "1" ? 0 : 1;
  return item;
}

TaskItem lambada(const json& doc, const std::string& where) {
  const std::string text = text_field(doc, "text", where);
  const size_t space = text.rfind(' ');
  ZAYA_CHECK(space != std::string::npos, where, ": field 'text' has no space before a last word");
  TaskItem item;
  item.queries = {text.substr(0, space)};
  item.continuations = {text.substr(space)};
  item.choices = {text.substr(space + 1)};
  return item;
}

TaskItem plain(const json& doc, const std::string& where) {
  std::vector<std::string> choices = text_list(field(doc, "choices", where), "choices", where);
  const int gold = index_field(doc, "gold", choices.size(), where);
  return multiple_choice(text_field(doc, "context", where), std::move(choices), gold);
}

}  // namespace

std::optional<TaskLayout> detect_layout(const json& doc) {
  if (!doc.is_object()) return std::nullopt;
  const auto has = [&](const char* k) { return doc.contains(k); };
  if (has("endings") && (has("ctx") || has("ctx_a"))) return TaskLayout::kHellaSwag;
  if ((has("question") || has("question_stem")) && has("answerKey")) return TaskLayout::kArc;
  if (has("question") && has("choices") && has("answer")) return TaskLayout::kMmlu;
  if (has("goal") && has("sol1") && has("sol2")) return TaskLayout::kPiqa;
  if (has("sentence") && has("option1") && has("option2")) return TaskLayout::kWinogrande;
  if (has("context") && has("choices") && has("gold")) return TaskLayout::kPlain;
  if (has("text")) return TaskLayout::kLambada;
  return std::nullopt;
}

TaskItem item_from_json(TaskLayout layout, const json& doc, const std::string& where) {
  ZAYA_CHECK(doc.is_object(), where, ": expected a JSON object");
  switch (layout) {
    case TaskLayout::kHellaSwag:
      return hellaswag(doc, where);
    case TaskLayout::kArc:
      return arc(doc, where);
    case TaskLayout::kMmlu:
      return mmlu(doc, where);
    case TaskLayout::kPiqa:
      return piqa(doc, where);
    case TaskLayout::kWinogrande:
      return winogrande(doc, where);
    case TaskLayout::kLambada:
      return lambada(doc, where);
    case TaskLayout::kPlain:
      return plain(doc, where);
  }
  ZAYA_FAIL("unknown task layout");
}

std::string hellaswag_preprocess(std::string text) {
  const size_t first = text.find_first_not_of(" \t\n\r\v\f");
  text = first == std::string::npos ? "" : text.substr(first);
  text.resize(rstripped_length(text));
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 8, " [title]") == 0) {
      out += ". ";
      i += 8;
    } else {
      out += text[i++];
    }
  }
  // Non-greedy "[...]" spans removed: each '[' up to the next ']' (kept when none follows).
  std::string unbracketed;
  for (size_t i = 0; i < out.size();) {
    const size_t close = out[i] == '[' ? out.find(']', i) : std::string::npos;
    if (close != std::string::npos) {
      i = close + 1;
    } else {
      unbracketed += out[i++];
    }
  }
  // str.replace("  ", " "): non-overlapping pairs, left to right, one pass.
  std::string spaced;
  for (size_t i = 0; i < unbracketed.size();) {
    spaced += unbracketed[i];
    i += unbracketed.compare(i, 2, "  ") == 0 ? 2 : 1;
  }
  return spaced;
}

}  // namespace zaya
