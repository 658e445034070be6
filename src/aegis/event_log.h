// The supervisor's event log, OUT/aegis/events.jsonl: one JSON object per line,
//   {"time": unix seconds, "kind": "...", "message": "one readable sentence", ...details}
// appended and flushed per event (a supervisor killed mid-run loses at most the line it wrote).
// Every event is also printed to stderr as "[aegis] message".
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zaya::aegis {

double unix_now();
std::string aegis_dir(const std::string& run_dir);    // OUT/aegis
std::string events_path(const std::string& run_dir);  // OUT/aegis/events.jsonl

class EventLog {
 public:
  explicit EventLog(const std::string& run_dir);
  void write(const std::string& kind, const std::string& message,
             nlohmann::json details = nlohmann::json::object());

 private:
  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, CloseFile> file_;
};

// Every event of a log; a missing file gives none.
std::vector<nlohmann::json> read_events(const std::string& path);

}  // namespace zaya::aegis
