// Log rules: regular expressions (ECMAScript syntax, matched anywhere in a line) over the job's
// output, each mapped to an action. A rules file is a JSON list such as
//   [{"regex": "NCCL (WARN|ERROR).*[Tt]imeout", "action": "restart"},
//    {"regex": "uncorrectable ECC error on (\\S+)", "action": "mark_bad_host"},
//    {"regex": "CUDA error: out of memory", "action": "stop"}]
// mark_bad_host takes the host from the regex's first capture group when it has one. The first
// rule that matches a line wins.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/regex.h"

namespace zaya::aegis {

enum class RuleAction { Restart, Stop, MarkHostBad };
const char* rule_action_name(RuleAction a);  // "restart", "stop", "mark_bad_host"

struct LogRule {
  std::string regex;
  RuleAction action = RuleAction::Restart;
  std::regex compiled;
};

// `where` (a file name) prefixes every error, which also names the rule's index.
std::vector<LogRule> parse_log_rules(const nlohmann::json& list, const std::string& where);
std::vector<LogRule> load_log_rules(const std::string& path);

struct RuleMatch {
  size_t index = 0;
  RuleAction action = RuleAction::Restart;
  std::string host;  // first capture group, empty without one
};

std::optional<RuleMatch> match_log_rules(const std::vector<LogRule>& rules,
                                         const std::string& line);

}  // namespace zaya::aegis
