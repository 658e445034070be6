// Log rules: regular expressions over the job's output, each mapped to an action. A rules file is
// a JSON list such as
//   [{"regex": "NCCL (WARN|ERROR).*[Tt]imeout", "action": "restart"},
//    {"regex": "uncorrectable ECC error on (\\S+)", "action": "mark_bad_host"},
//    {"regex": "CUDA error: out of memory", "action": "stop"}]
// mark_bad_host takes the host from the regex's first capture group when it has one. The first
// rule that matches a line wins.
//
// Syntax: RE2 (https://github.com/google/re2/wiki/Syntax), matched anywhere in the line (UTF-8).
// RE2 runs in time linear in the line on every pattern, so a hostile or huge log line cannot hang
// or crash the supervisor the way a backtracking engine (std::regex) can. It is the familiar
// Perl/ECMAScript syntax (classes \d \s \w, groups, alternation, anchors ^ $, repetitions, (?i))
// without backreferences (\1) and lookaround ((?=...), (?!...), (?<=...)); a rule that RE2
// cannot compile is an error naming the rules file, the rule's index and RE2's message.
// Only the first kMaxRuleLineBytes of a line are matched, as if the line ended there ($ matches
// at the cut).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace re2 {
class RE2;
}

namespace zaya::aegis {

// Lines longer than this are matched on their first kMaxRuleLineBytes bytes: a fault message is
// short, and the cap bounds the work per line whatever the job prints.
constexpr size_t kMaxRuleLineBytes = 64 * 1024;

enum class RuleAction { Restart, Stop, MarkHostBad };
const char* rule_action_name(RuleAction a);  // "restart", "stop", "mark_bad_host"

struct LogRule {
  std::string regex;
  RuleAction action = RuleAction::Restart;
  std::shared_ptr<const re2::RE2> compiled;  // shared: RE2 is neither copyable nor movable
};

// "restart", "stop" or "mark_bad_host"; any other name is an error that begins with `context`.
RuleAction parse_rule_action(const std::string& name, const std::string& context);
// A rules file's JSON, its depth bounded; an error names the file.
nlohmann::json read_rules_json(const std::string& path);

// `where` (a file name) prefixes every error, which also names the rule's index.
std::vector<LogRule> parse_log_rules(const nlohmann::json& list, const std::string& where);
std::vector<LogRule> load_log_rules(const std::string& path);

struct RuleMatch {
  size_t index = 0;
  RuleAction action = RuleAction::Restart;
  std::string host;  // first capture group, empty without one
};

std::optional<RuleMatch> match_log_rules(const std::vector<LogRule>& rules, std::string_view line);

}  // namespace zaya::aegis
