#include "aegis/log_rules.h"

#include <re2/re2.h>

#include <algorithm>

#include "core/error.h"
#include "io/json_limits.h"
#include "io/text_file.h"

namespace zaya::aegis {

using nlohmann::json;

const char* rule_action_name(RuleAction a) {
  switch (a) {
    case RuleAction::Restart:
      return "restart";
    case RuleAction::Stop:
      return "stop";
    case RuleAction::MarkHostBad:
      return "mark_bad_host";
  }
  return "?";
}

std::vector<LogRule> parse_log_rules(const json& list, const std::string& where) {
  ZAYA_CHECK(list.is_array(), where, ": expected a JSON list of {\"regex\": ..., \"action\": ...}");
  std::vector<LogRule> rules;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& r = list[i];
    ZAYA_CHECK(r.is_object() && r.contains("regex") && r["regex"].is_string(), where, ": rule ", i,
               " needs a string 'regex'");
    ZAYA_CHECK(r.contains("action") && r["action"].is_string(), where, ": rule ", i,
               " needs a string 'action' (restart, stop or mark_bad_host)");
    for (const auto& [key, value] : r.items())
      ZAYA_CHECK(key == "regex" || key == "action", where, ": rule ", i, " has unknown key '", key,
                 "' (a rule has 'regex' and 'action' only)");
    // An empty pattern matches every line: the first line of output would fire the rule.
    ZAYA_CHECK(!r["regex"].get<std::string>().empty(), where, ": rule ", i,
               " has an empty 'regex', which would match every line of the job's output");
    LogRule rule;
    rule.regex = r["regex"].get<std::string>();
    rule.action =
        parse_rule_action(r["action"].get<std::string>(), where + ": rule " + std::to_string(i));
    RE2::Options options;
    options.set_log_errors(false);  // the error below says it, once and with the rule's index
    auto compiled = std::make_shared<const RE2>(rule.regex, options);
    ZAYA_CHECK(compiled->ok(), where, ": rule ", i, " regex '", rule.regex,
               "' does not compile (RE2 syntax, see docs/aegis.md): ", compiled->error());
    rule.compiled = std::move(compiled);
    rules.push_back(std::move(rule));
  }
  return rules;
}

RuleAction parse_rule_action(const std::string& name, const std::string& context) {
  if (name == "restart") return RuleAction::Restart;
  if (name == "stop") return RuleAction::Stop;
  if (name == "mark_bad_host") return RuleAction::MarkHostBad;
  ZAYA_FAIL(context, " has action '", name, "'; expected restart, stop or mark_bad_host");
}

json read_rules_json(const std::string& path) {
  const std::string text = read_text_file(path);
  check_json_depth(text, path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    ZAYA_FAIL(path, ": not valid JSON: ", e.what());
  }
}

std::vector<LogRule> load_log_rules(const std::string& path) {
  return parse_log_rules(read_rules_json(path), path);
}

std::optional<RuleMatch> match_log_rules(const std::vector<LogRule>& rules, std::string_view line) {
  const re2::StringPiece text(line.data(), std::min(line.size(), kMaxRuleLineBytes));
  for (size_t i = 0; i < rules.size(); ++i) {
    const RE2& re = *rules[i].compiled;
    // Group 0 is the whole match, group 1 the host of mark_bad_host; asking for fewer groups
    // lets RE2 answer with its DFA alone.
    const int groups = re.NumberOfCapturingGroups() > 0 ? 2 : 0;
    re2::StringPiece sub[2];
    if (!re.Match(text, 0, text.size(), RE2::UNANCHORED, sub, groups)) continue;
    RuleMatch match{i, rules[i].action, groups > 1 ? sub[1].as_string() : ""};
    return match;
  }
  return std::nullopt;
}

}  // namespace zaya::aegis
