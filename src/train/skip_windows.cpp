#include "train/skip_windows.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_limits.h"
#include "io/text_file.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

std::string skip_windows_path(const std::string& out_dir) {
  return (fs::path(out_dir) / "skip_windows.json").string();
}

SkipWindows::SkipWindows(std::vector<SkipWindow> windows) : windows_(std::move(windows)) {
  std::stable_sort(windows_.begin(), windows_.end(),
                   [](const SkipWindow& a, const SkipWindow& b) { return a.begin < b.begin; });
}

SkipWindows SkipWindows::load(const std::string& out_dir) {
  const std::string path = skip_windows_path(out_dir);
  if (!fs::exists(path)) return {};
  const std::string text = read_text_file(path);
  check_json_depth(text, path);
  json list;
  try {
    list = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    ZAYA_FAIL(path, ": not valid JSON: ", e.what());
  }
  ZAYA_CHECK(list.is_array(), path, ": expected a JSON list of {begin, end, reason}");
  std::vector<SkipWindow> windows;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& w = list[i];
    ZAYA_CHECK(w.is_object() && w.contains("begin") && w["begin"].is_number_integer() &&
                   w.contains("end") && w["end"].is_number_integer(),
               path, ": entry ", i, " needs integer 'begin' and 'end'");
    SkipWindow s{w["begin"].get<int64_t>(), w["end"].get<int64_t>(), w.value("reason", "")};
    ZAYA_CHECK(s.begin >= 0 && s.begin < s.end, path, ": entry ", i, " has begin ", s.begin,
               " and end ", s.end, "; expected 0 <= begin < end");
    windows.push_back(std::move(s));
  }
  return SkipWindows(std::move(windows));
}

int64_t SkipWindows::next_unskipped(int64_t g) const {
  // Sorted by begin, so one pass follows chains of adjacent or overlapping windows.
  for (const SkipWindow& w : windows_) {
    if (w.begin > g) break;
    if (g < w.end) g = w.end;
  }
  return g;
}

void add_skip_window(const std::string& out_dir, const SkipWindow& window) {
  json list = json::array();
  const SkipWindows existing = SkipWindows::load(out_dir);
  for (const SkipWindow& w : existing.windows())
    list.push_back({{"begin", w.begin}, {"end", w.end}, {"reason", w.reason}});
  list.push_back({{"begin", window.begin}, {"end", window.end}, {"reason", window.reason}});
  write_file_atomically(skip_windows_path(out_dir), list.dump(1) + "\n", /*durable=*/true);
}

}  // namespace zaya
