// Aegis against hostile job output: log rules run in linear time on any line (RE2, lines cut at
// kMaxRuleLineBytes), the line reader holds a bounded amount of an endless line, and a launch
// command that cannot be executed is named with the reason.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "aegis/job_process.h"
#include "aegis/line_splitter.h"
#include "aegis/log_rules.h"
#include "test_util.h"

namespace zaya::aegis {
namespace {

using nlohmann::json;

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A backtracking engine takes exponential time (or overflows its stack) on these; RE2 is linear.
TEST(LogRulesHostile, BacktrackingRulesOnHugeLinesReturnPromptly) {
  const auto rules = parse_log_rules(json::parse(R"js([
      {"regex": "(a+)+$", "action": "restart"},
      {"regex": "NCCL (WARN|ERROR).*[Tt]imeout", "action": "restart"},
      {"regex": "uncorrectable ECC error on (\\S+)", "action": "mark_bad_host"}])js"),
                                     "rules.json");
  const std::string no_match = std::string(60000, 'a') + "b";    // (a+)+$ must fail at the end
  const std::string long_line = std::string(100000, 'a') + "b";  // cut at 64 KiB, all 'a'
  const std::string huge_line = "NCCL WARN " + std::string(10 * 1000 * 1000, 'x') + " Timeout";
  std::optional<RuleMatch> m1, m2, m3;
  const double s = seconds_of([&] {
    m1 = match_log_rules(rules, no_match);
    m2 = match_log_rules(rules, long_line);
    m3 = match_log_rules(rules, huge_line);
  });
  EXPECT_LT(s, 2.0);
  EXPECT_FALSE(m1);
  // Only the first kMaxRuleLineBytes are matched, as if the line ended there: $ matches at the
  // cut, and the "Timeout" 10 MB on is never seen.
  ASSERT_TRUE(m2);
  EXPECT_EQ(m2->index, 0u);
  EXPECT_FALSE(m3);
  const auto host = match_log_rules(
      rules, "uncorrectable ECC error on node17 " + std::string(10 * 1000 * 1000, ' '));
  ASSERT_TRUE(host);
  EXPECT_EQ(host->host, "node17");
}

TEST(LogRulesHostile, AnUncompilableRuleNamesFileIndexAndRe2sMessage) {
  const std::string e = test::error_of([] {
    parse_log_rules(json::parse(R"js([{"regex": "ok", "action": "stop"},
                                      {"regex": "(?=lookahead)", "action": "stop"}])js"),
                    "my_rules.json");
  });
  EXPECT_NE(e.find("my_rules.json: rule 1 regex '(?=lookahead)' does not compile"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("invalid perl operator: (?="), std::string::npos) << e;  // RE2's own words
}

TEST(LineSplitter, ATenMegabyteLineIsCutAndNotBuffered) {
  LineSplitter splitter(kMaxRuleLineBytes);
  std::vector<OutputLine> lines;
  splitter.feed("first\n", lines);
  const std::string chunk(65536, 'z');
  size_t most_buffered = 0;
  for (int i = 0; i < 160; ++i) {  // 10 MB without a newline
    splitter.feed(chunk, lines);
    most_buffered = std::max(most_buffered, splitter.buffered_bytes());
  }
  EXPECT_LE(most_buffered, kMaxRuleLineBytes);
  ASSERT_EQ(lines.size(), 2u);  // the long line is handed on as soon as it reaches the cap
  EXPECT_EQ(lines[1].text.size(), kMaxRuleLineBytes);
  EXPECT_TRUE(lines[1].cut);
  splitter.feed("zzz tail\nnext line\npartial", lines);
  splitter.finish(lines);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2].text, "next line");
  EXPECT_FALSE(lines[2].cut);
  EXPECT_EQ(lines[3].text, "partial");
}

TEST(LineSplitter, ALineOfExactlyTheCapIsWhole) {
  LineSplitter splitter(4);
  std::vector<OutputLine> lines;
  splitter.feed("abcd", lines);
  splitter.feed("\nabcde\n", lines);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].text, "abcd");
  EXPECT_FALSE(lines[0].cut);
  EXPECT_EQ(lines[1].text, "abcd");
  EXPECT_TRUE(lines[1].cut);
}

// The real reader on a job that prints 10 MB without a newline and then waits.
TEST(JobProcessOutput, AnEndlessLineFromTheJobIsCut) {
  JobProcess job(
      {"sh", "-c", "head -c 10000000 /dev/zero | tr '\\000' a; echo; echo done; sleep 5"}, {});
  std::vector<OutputLine> lines;
  const auto t0 = std::chrono::steady_clock::now();
  while (lines.size() < 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    for (OutputLine& l : job.read_lines(0.1)) lines.push_back(std::move(l));
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].text, std::string(kMaxRuleLineBytes, 'a'));
  EXPECT_TRUE(lines[0].cut);
  EXPECT_EQ(lines[1].text, "done");
  job.stop(1.0);
}

TEST(JobProcessLaunch, ACommandThatCannotBeExecutedIsNamedWithTheReason) {
  try {
    JobProcess job({"zaya-no-such-command-xyz"}, {});
    FAIL() << "expected a LaunchError";
  } catch (const LaunchError& e) {
    EXPECT_STREQ(e.what(), "cannot execute 'zaya-no-such-command-xyz': No such file or directory");
  }
  try {
    JobProcess job({"/dev/null"}, {});
    FAIL() << "expected a LaunchError";
  } catch (const LaunchError& e) {
    EXPECT_STREQ(e.what(), "cannot execute '/dev/null': Permission denied");
  }
}

}  // namespace
}  // namespace zaya::aegis
