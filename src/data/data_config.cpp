#include "data/data_config.h"

#include <fstream>
#include <set>

#include "core/error.h"
#include "core/json_number.h"
#include "io/input_files.h"
#include "io/json_limits.h"
#include "io/text_file.h"

namespace zaya {

using nlohmann::json;

namespace {

void check_known_fields(const json& j, const std::set<std::string>& known, const std::string& where,
                        const std::string& prefix) {
  for (const auto& [key, value] : j.items()) {
    if (known.count(key)) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    ZAYA_FAIL(where, ": unknown field '", prefix, ".", key, "' (known fields: ", list, ")");
  }
}

const json& require(const json& j, const char* key, const std::string& where,
                    const std::string& prefix) {
  ZAYA_CHECK(j.contains(key), where, ": missing required field '", prefix, ".", key, "'");
  return j.at(key);
}

}  // namespace

DataConfig data_config_from_json(const json& j, const std::string& where) {
  ZAYA_CHECK(j.is_object(), where, ": 'data' must be a JSON object");
  check_known_fields(j, {"dir", "sources", "phases"}, where, "data");
  DataConfig c;
  if (j.contains("dir")) {
    ZAYA_CHECK(j.at("dir").is_string(), where, ": field 'data.dir' must be a string, got ",
               j.at("dir").dump());
    c.dir = j.at("dir").get<std::string>();
  }

  const json& sources = require(j, "sources", where, "data");
  ZAYA_CHECK(sources.is_array() && !sources.empty(), where,
             ": field 'data.sources' must be a non-empty array of source names, got ",
             sources.dump());
  for (size_t i = 0; i < sources.size(); ++i) {
    const json& s = sources[i];
    ZAYA_CHECK(s.is_string() && !s.get<std::string>().empty(), where, ": field 'data.sources[", i,
               "]' must be a non-empty string, got ", s.dump());
    const std::string name = s.get<std::string>();
    for (const auto& prev : c.sources)
      ZAYA_CHECK(prev != name, where, ": field 'data.sources[", i, "]': source '", name,
                 "' is listed twice");
    c.sources.push_back(name);
  }

  const json& phases = require(j, "phases", where, "data");
  ZAYA_CHECK(phases.is_array() && !phases.empty(), where,
             ": field 'data.phases' must be a non-empty array of phases");
  for (size_t p = 0; p < phases.size(); ++p) {
    const std::string at = "data.phases[" + std::to_string(p) + "]";
    const json& ph = phases[p];
    ZAYA_CHECK(ph.is_object(), where, ": field '", at, "' must be an object");
    check_known_fields(ph, {"name", "tokens", "seq_len", "rope_theta", "mixture", "global_batch"},
                       where, at);
    DataPhase phase;
    const json& name = require(ph, "name", where, at);
    ZAYA_CHECK(name.is_string(), where, ": field '", at, ".name' must be a string");
    phase.name = name.get<std::string>();
    const json& tokens = require(ph, "tokens", where, at);
    // 2^50 tokens is ~1,000 times ZAYA1-base's pretraining budget and keeps token counts, sample
    // indices and their sums far inside int64.
    phase.tokens = json_integer(tokens, 1, int64_t(1) << 50, where + ": field '" + at + ".tokens'");
    const json& seq = require(ph, "seq_len", where, at);
    phase.seq_len = json_integer(seq, 1, int64_t(1) << 24, where + ": field '" + at + ".seq_len'");
    const json& theta = require(ph, "rope_theta", where, at);
    phase.rope_theta = json_finite(theta, 1e-300, 1e300, where + ": field '" + at + ".rope_theta'");
    if (ph.contains("global_batch"))
      phase.global_batch = json_integer(ph["global_batch"], 1, int64_t(1) << 30,
                                        where + ": field '" + at + ".global_batch'");

    const json& mix = require(ph, "mixture", where, at);
    ZAYA_CHECK(mix.is_object() && !mix.empty(), where, ": field '", at,
               ".mixture' must be an object of source weights, e.g. {\"brown\": 1.0}");
    phase.weights.assign(c.sources.size(), 0.0);
    double total = 0;
    for (const auto& [src, w] : mix.items()) {
      size_t s = 0;
      while (s < c.sources.size() && c.sources[s] != src) ++s;
      ZAYA_CHECK(s < c.sources.size(), where, ": field '", at, ".mixture.", src, "': source '", src,
                 "' is not in data.sources");
      // Bounded so that the sum stays finite: weights summing to infinity once normalised to NaN
      // and overflowed the loader's sampling tables.
      phase.weights[s] =
          json_finite(w, 0.0, 1e12, where + ": field '" + at + ".mixture." + src + "'");
      total += phase.weights[s];
    }
    ZAYA_CHECK(total > 0, where, ": field '", at, ".mixture': weights sum to 0, expected > 0");
    for (double& w : phase.weights) w /= total;
    c.phases.push_back(std::move(phase));
  }
  return c;
}

DataConfig load_data_config(const std::string& path) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), path, ": cannot open config file");
  require_regular_file(path, "config file");
  const json j = parse_json_checked(read_text_file(path), path);
  ZAYA_CHECK(j.is_object() && j.contains("data"), path, ": missing required section 'data'");
  return data_config_from_json(j.at("data"), path);
}

int64_t DataConfig::total_tokens() const {
  int64_t total = 0;
  for (const auto& p : phases) total += p.tokens;
  return total;
}

int DataConfig::phase_at(int64_t tokens_consumed) const {
  ZAYA_CHECK(tokens_consumed >= 0, "phase_at: tokens consumed must be >= 0, got ", tokens_consumed);
  int64_t end = 0;
  for (size_t p = 0; p < phases.size(); ++p) {
    end += phases[p].tokens;
    if (tokens_consumed < end) return int(p);
  }
  return int(phases.size()) - 1;
}

}  // namespace zaya
