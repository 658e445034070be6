#include "data/prepare_plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <numeric>

namespace zaya {

using nlohmann::json;

namespace {

json file_stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {{"path", path}};
  const int64_t mtime_ns = int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return {{"path", path}, {"bytes", int64_t(st.st_size)}, {"mtime_ns", mtime_ns}};
}

}  // namespace

json parts_plan(const PrepareOptions& o, const std::vector<std::string>& files,
                const TextEncoder& encoder) {
  json inputs = json::array();
  for (const auto& f : files) inputs.push_back(file_stamp(f));
  json tokenizer = file_stamp(o.tokenizer);
  tokenizer["vocab_size"] = encoder.vocab_size();
  tokenizer["eos_id"] = encoder.eos_id();
  return {{"version", 1},
          {"inputs", std::move(inputs)},
          {"tokenizer", std::move(tokenizer)},
          {"format", input_format_name(o.format)},
          {"doc_separator", o.doc_separator},
          {"text_key", o.text_key},
          {"id_key", o.id_key},
          {"min_chars", o.min_chars},
          {"text_hashes", o.dedup_exact},
          {"skip_bad", o.skip_bad}};
}

std::string plan_difference(const json& before, const json& now) {
  for (const auto& [key, value] : now.items()) {
    if (before.contains(key) && before.at(key) == value) continue;
    if (key == "inputs" && before.contains(key) && before.at(key).is_array() &&
        before.at(key).size() == value.size()) {
      for (size_t i = 0; i < value.size(); ++i)
        if (before.at(key)[i] != value[i])
          return "input " + value[i].value("path", "?") + " is not the file it was (" +
                 before.at(key)[i].dump() + ", now " + value[i].dump() + ")";
    }
    return key + " was " + (before.contains(key) ? before.at(key).dump() : "absent") + ", now " +
           value.dump();
  }
  return "";
}

std::vector<int> files_of_rank(const std::vector<int64_t>& sizes, int rank, int world) {
  std::vector<int> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return sizes[size_t(a)] > sizes[size_t(b)]; });
  std::vector<int64_t> load(size_t(world), 0);
  std::vector<int> mine;
  for (int f : order) {
    const auto least = std::min_element(load.begin(), load.end());
    load[size_t(least - load.begin())] += std::max<int64_t>(1, sizes[size_t(f)]);
    if (least - load.begin() == rank) mine.push_back(f);
  }
  std::sort(mine.begin(), mine.end());
  return mine;
}

}  // namespace zaya
