#include "train/run_dir.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "ckpt/checkpoint.h"
#include "core/error.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

void refuse_existing_run(const std::string& out_dir) {
  // aegis/, heartbeat/ and skip_windows.json are written by the supervisor before it launches the
  // first attempt; they are not a run of their own.
  std::vector<std::string> found;
  for (const char* name : {"metrics.jsonl", "summary.json", "model", "ckpt"})
    if (fs::exists(fs::path(out_dir) / name)) found.push_back(name);
  if (found.empty()) return;
  std::string list;
  for (const std::string& f : found) list += (list.empty() ? "" : ", ") + f;
  ZAYA_FAIL("--out ", out_dir, " already holds a run (", list,
            "); nothing was changed. Continue it with --resume auto, or train into another --out");
}

std::optional<int64_t> finished_run_steps(const std::string& out_dir) {
  const fs::path path = fs::path(out_dir) / "summary.json";
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const json s = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!s.is_object() || !s.contains("steps") || !s["steps"].is_number_integer() ||
      s.value("interrupted", true))
    return std::nullopt;
  return s["steps"].get<int64_t>();
}

bool has_committed_checkpoints(const std::string& ckpt_root) {
  if (!fs::is_directory(ckpt_root)) return false;
  for (const auto& d : fs::directory_iterator(ckpt_root))
    if (d.is_directory() && committed_checkpoint_step(d.path().filename().string())) return true;
  return false;
}

namespace {

// Only the keys `keep` of a (those it has).
json pick(const json& a, std::initializer_list<const char*> keep) {
  json out = json::object();
  if (a.is_object())
    for (const char* k : keep)
      if (a.contains(k)) out[k] = a[k];
  return out;
}

// a with the keys of `drop` removed (top level only).
json without(json a, std::initializer_list<const char*> drop) {
  if (a.is_object())
    for (const char* k : drop) a.erase(k);
  return a;
}

std::string differences(const json& saved, const json& now, const std::string& prefix) {
  std::string out;
  std::vector<std::string> names;
  if (saved.is_object())
    for (const auto& [k, v] : saved.items()) names.push_back(k);
  if (now.is_object())
    for (const auto& [k, v] : now.items())
      if (!saved.is_object() || !saved.contains(k)) names.push_back(k);
  for (const std::string& k : names) {
    const json a = saved.is_object() ? saved.value(k, json()) : json();
    const json b = now.is_object() ? now.value(k, json()) : json();
    if (a != b)
      out += "\n  " + prefix + k + ": checkpoint " + (a.is_null() ? "(unset)" : a.dump()) +
             ", now " + (b.is_null() ? "(unset)" : b.dump());
  }
  return out;
}

}  // namespace

void check_resume_config(const json& saved, const json& now, const std::string& checkpoint,
                         bool allow_changes, const std::function<void(const std::string&)>& note) {
  const json st = saved.value("train", json::object()), nt = now.value("train", json::object());
  const json so = st.value("optim", json::object()), no = nt.value("optim", json::object());
  // What the run is: the model, the data (wherever it now lives), the sample order and batches.
  std::string identity =
      differences(saved.value("model", json()), now.value("model", json()), "model.") +
      differences(without(saved.value("data", json()), {"dir"}),
                  without(now.value("data", json()), {"dir"}), "data.");
  identity += differences(pick(st, {"seed", "global_batch"}), pick(nt, {"seed", "global_batch"}),
                          "train.") +
              differences(pick(so, {"batch_ramp"}), pick(no, {"batch_ramp"}), "train.optim.");
  ZAYA_CHECK(identity.empty(), "cannot resume from ", checkpoint,
             ": the config changes what the run is (its model, data, seed or batches), which a "
             "resume must keep:",
             identity, "\nStart a new run with another --out (--init-from ", checkpoint,
             " keeps the weights).");
  // Numbers of the update: allowed only on request.
  const std::string numeric =
      differences(without(so, {"batch_ramp"}), without(no, {"batch_ramp"}), "train.optim.") +
      differences(pick(st, {"micro_batch"}), pick(nt, {"micro_batch"}), "train.");
  ZAYA_CHECK(numeric.empty() || allow_changes, "cannot resume from ", checkpoint,
             " with changed optimizer settings or micro-batch without --allow-changes (the run "
             "would no longer continue the uninterrupted one exactly):",
             numeric);
  if (!numeric.empty()) note("resume with changed settings (--allow-changes):" + numeric);
  // Cadence and outputs: free, but said.
  const std::string cadence =
      differences(without(st, {"seed", "global_batch", "micro_batch", "optim"}),
                  without(nt, {"seed", "global_batch", "micro_batch", "optim"}), "train.");
  if (!cadence.empty()) note("resume with changed run settings:" + cadence);
}

}  // namespace zaya
