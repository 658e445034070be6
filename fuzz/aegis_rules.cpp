// aegis log rules (a JSON list of {regex, action}): load_log_rules compiles each regex with RE2,
// then match_log_rules runs the rules over fixed log lines and over the input's own lines, so
// that fuzzed patterns meet fuzzed text.
#include <string>
#include <vector>

#include "aegis/log_rules.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::write_input("rules.json", data, size);
  std::vector<zaya::aegis::LogRule> rules;
  ZAYA_FUZZ_EXPECT_ERRORS(rules = zaya::aegis::load_log_rules(path));
  if (rules.empty()) return 0;
  static const char* const kLines[] = {
      "", "NCCL error: unhandled system error", "CUDA error: an illegal memory access on node07",
      "step 100 loss 3.2", "Xid 79 on host gpu-12: GPU has fallen off the bus"};
  ZAYA_FUZZ_EXPECT_ERRORS({
    for (const char* line : kLines) zaya::aegis::match_log_rules(rules, line);
    const std::string_view text = zaya::fuzz::as_text(data, size);
    size_t begin = 0;
    while (begin <= text.size()) {
      const size_t end = std::min(text.find('\n', begin), text.size());
      zaya::aegis::match_log_rules(rules, text.substr(begin, end - begin));
      begin = end + 1;
    }
  });
  return 0;
}
