#include "aegis/event_log.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace zaya::aegis {

namespace fs = std::filesystem;
using nlohmann::json;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string aegis_dir(const std::string& run_dir) {
  return (fs::path(run_dir) / "aegis").string();
}

std::string events_path(const std::string& run_dir) {
  return (fs::path(aegis_dir(run_dir)) / "events.jsonl").string();
}

EventLog::EventLog(const std::string& run_dir) : path_(events_path(run_dir)) {
  fs::create_directories(aegis_dir(run_dir));
  file_.reset(std::fopen(path_.c_str(), "a"));
  ZAYA_CHECK(file_, "cannot open the event log '", path_, "' for appending");
}

void EventLog::write(const std::string& kind, const std::string& message, json details) {
  json event = {{"time", unix_now()}, {"kind", kind}, {"message", message}};
  for (auto& [key, value] : details.items()) event[key] = value;
  std::fprintf(file_.get(), "%s\n", event.dump().c_str());
  ZAYA_CHECK(std::fflush(file_.get()) == 0, "writing the event log '", path_, "' failed");
  std::fprintf(stderr, "[aegis] %s\n", message.c_str());
  std::fflush(stderr);
}

std::vector<json> read_events(const std::string& path) {
  std::vector<json> events;
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    json e = json::parse(line, nullptr, /*allow_exceptions=*/false);
    ZAYA_CHECK(!e.is_discarded(), path, ": line ", n, " is not JSON");
    events.push_back(std::move(e));
  }
  return events;
}

}  // namespace zaya::aegis
