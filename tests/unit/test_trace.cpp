// The trace recorder (core/trace.h) and --trace-steps (train/run_trace.h): spans are kept only
// while a recorder is active and enabled, with their thread's name and a collective's bytes, as
// Chrome Trace Event JSON; a name is built only when recording.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/trace.h"
#include "train/run_trace.h"

namespace zaya {
namespace {

TEST(Trace, SpansAreKeptOnlyWhileARecorderIsEnabled) {
  int built = 0;
  auto name = [&] {
    ++built;
    return std::string("lazy");
  };
  { const trace::Span none("nothing records", "model"); }
  trace::Recorder recorder;
  { const trace::Span off("model", name); }
  EXPECT_EQ(recorder.size(), 0u);
  EXPECT_EQ(built, 0) << "no name is built while disabled";
  recorder.set_enabled(true);
  trace::name_thread("tester");
  { const trace::Span on("model", name); }
  { const trace::Span bytes("world all_reduce", "collective", 4096); }
  recorder.set_enabled(false);
  { const trace::Span after("after", "model"); }
  EXPECT_EQ(built, 1);
  ASSERT_EQ(recorder.size(), 2u);
  const nlohmann::json events = nlohmann::json::parse("[" + recorder.events_json(3) + "]");
  std::map<std::string, nlohmann::json> spans;
  bool named = false;
  for (const auto& e : events) {
    EXPECT_EQ(e["pid"], 3);
    if (e["ph"] == "X") spans[e["name"].get<std::string>()] = e;
    named = named || (e["name"] == "thread_name" && e["args"]["name"] == "tester");
  }
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans.at("world all_reduce")["args"]["bytes"], 4096);
  EXPECT_FALSE(spans.at("lazy").contains("args"));
  EXPECT_GE(spans.at("lazy")["dur"].get<double>(), 0.0);
  EXPECT_TRUE(named);
  EXPECT_THROW(trace::Recorder second, Error) << "one active recorder per process";
}

TEST(Trace, StepsWindow) {
  ASSERT_TRUE(parse_trace_steps("2:3"));
  EXPECT_EQ(parse_trace_steps("4:4")->first, 4);
  EXPECT_EQ(parse_trace_steps("4:9")->last, 9);
  for (const char* bad : {"", "3", "3:2", "0:1", "1:2:3", "a:b", "1:2x", "-1:2"})
    EXPECT_FALSE(parse_trace_steps(bad)) << bad;
}

}  // namespace
}  // namespace zaya
