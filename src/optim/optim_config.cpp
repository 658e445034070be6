#include "optim/optim_config.h"

#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_number.h"

namespace zaya {

using nlohmann::json;

namespace {

// Reads one field with type checking; absent fields keep the default in `out`.
class FieldReader {
 public:
  FieldReader(const json& j, const std::string& where, const std::string& prefix)
      : j_(j), where_(where), prefix_(prefix) {}

  std::string field(const std::string& key) const { return prefix_ + "." + key; }

  void number(const char* key, double& out) const {
    if (!j_.contains(key)) return;
    const json& v = j_.at(key);
    out = json_finite(v, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max(),
                      where_ + ": field '" + field(key) + "'");
  }
  void integer(const char* key, int64_t& out) const {
    if (!j_.contains(key)) return;
    const json& v = j_.at(key);
    out = json_integer(v, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                       where_ + ": field '" + field(key) + "'");
  }
  void boolean(const char* key, bool& out) const {
    if (!j_.contains(key)) return;
    const json& v = j_.at(key);
    ZAYA_CHECK(v.is_boolean(), where_, ": field '", field(key), "' must be true or false, got ",
               v.dump());
    out = v.get<bool>();
  }
  void only_known(const std::set<std::string>& known) const {
    ZAYA_CHECK(j_.is_object(), where_, ": '", prefix_, "' must be a JSON object, got ", j_.dump());
    for (const auto& [key, value] : j_.items()) {
      ZAYA_CHECK(known.count(key), where_, ": unknown field '", field(key), "'");
    }
  }

 private:
  const json& j_;
  std::string where_;
  std::string prefix_;  // owned: nested readers get a temporary prefix
};

LrSchedule parse_schedule(const json& v, const std::string& where, const std::string& field) {
  ZAYA_CHECK(v.is_string(), where, ": field '", field, "' must be a string, got ", v.dump());
  const std::string s = v.get<std::string>();
  if (s == "cosine") return LrSchedule::Cosine;
  if (s == "wsd") return LrSchedule::Wsd;
  if (s == "constant") return LrSchedule::Constant;
  ZAYA_FAIL(where, ": field '", field, "' must be \"cosine\", \"wsd\" or \"constant\", got \"", s,
            "\"");
}

}  // namespace

const char* lr_schedule_name(LrSchedule s) {
  switch (s) {
    case LrSchedule::Cosine:
      return "cosine";
    case LrSchedule::Wsd:
      return "wsd";
    case LrSchedule::Constant:
      return "constant";
  }
  return "?";
}

OptimConfig optim_config_from_json(const json& j, const std::string& where,
                                   const std::string& prefix) {
  const FieldReader r(j, where, prefix);
  r.only_known({"lr", "min_lr", "warmup_steps", "schedule", "decay_fraction", "weight_decay",
                "adam_beta1", "adam_beta2", "adam_eps", "muon_momentum", "muon_nesterov",
                "muon_ns_steps", "muon", "grad_clip", "router_bias_lr", "router_bias_beta1",
                "router_bias_beta2", "batch_ramp"});
  OptimConfig c;
  r.number("lr", c.lr);
  r.number("min_lr", c.min_lr);
  r.integer("warmup_steps", c.warmup_steps);
  if (j.contains("schedule"))
    c.schedule = parse_schedule(j.at("schedule"), where, r.field("schedule"));
  r.number("decay_fraction", c.decay_fraction);
  r.number("weight_decay", c.weight_decay);
  r.number("adam_beta1", c.adam_beta1);
  r.number("adam_beta2", c.adam_beta2);
  r.number("adam_eps", c.adam_eps);
  r.number("muon_momentum", c.muon_momentum);
  r.boolean("muon_nesterov", c.muon_nesterov);
  r.integer("muon_ns_steps", c.muon_ns_steps);
  r.boolean("muon", c.muon);
  r.number("grad_clip", c.grad_clip);
  r.number("router_bias_lr", c.router_bias_lr);
  r.number("router_bias_beta1", c.router_bias_beta1);
  r.number("router_bias_beta2", c.router_bias_beta2);
  if (j.contains("batch_ramp")) {
    const FieldReader ramp(j.at("batch_ramp"), where, r.field("batch_ramp"));
    ramp.only_known({"start_sequences", "ramp_steps"});
    ZAYA_CHECK(j.at("batch_ramp").contains("start_sequences"), where, ": missing field '",
               ramp.field("start_sequences"), "'");
    ZAYA_CHECK(j.at("batch_ramp").contains("ramp_steps"), where, ": missing field '",
               ramp.field("ramp_steps"), "'");
    BatchRamp b;
    ramp.integer("start_sequences", b.start_sequences);
    ramp.integer("ramp_steps", b.ramp_steps);
    c.batch_ramp = b;
  }
  c.validate(where, prefix);
  return c;
}

void OptimConfig::validate(const std::string& where, const std::string& prefix) const {
  auto field = [&](const char* key) { return prefix + "." + key; };
  ZAYA_CHECK(lr > 0, where, ": field '", field("lr"), "' must be > 0, got ", lr);
  ZAYA_CHECK(min_lr >= 0 && min_lr <= lr, where, ": field '", field("min_lr"),
             "' must be in [0, lr = ", lr, "], got ", min_lr);
  ZAYA_CHECK(warmup_steps >= 0, where, ": field '", field("warmup_steps"), "' must be >= 0, got ",
             warmup_steps);
  ZAYA_CHECK(decay_fraction > 0 && decay_fraction <= 1, where, ": field '", field("decay_fraction"),
             "' must be in (0, 1], got ", decay_fraction);
  ZAYA_CHECK(weight_decay >= 0, where, ": field '", field("weight_decay"), "' must be >= 0, got ",
             weight_decay);
  // Betas in [0, 1): beta = 1 would freeze the moments and make bias correction divide by zero.
  const std::pair<const char*, double> betas[] = {{"adam_beta1", adam_beta1},
                                                  {"adam_beta2", adam_beta2},
                                                  {"muon_momentum", muon_momentum},
                                                  {"router_bias_beta1", router_bias_beta1},
                                                  {"router_bias_beta2", router_bias_beta2}};
  for (const auto& [key, value] : betas) {
    ZAYA_CHECK(value >= 0 && value < 1, where, ": field '", field(key), "' must be in [0, 1), got ",
               value);
  }
  ZAYA_CHECK(adam_eps > 0, where, ": field '", field("adam_eps"), "' must be > 0, got ", adam_eps);
  ZAYA_CHECK(muon_ns_steps >= 1 && muon_ns_steps <= 100, where, ": field '", field("muon_ns_steps"),
             "' must be in [1, 100], got ", muon_ns_steps);
  ZAYA_CHECK(grad_clip >= 0, where, ": field '", field("grad_clip"),
             "' must be >= 0 (0 = off), got ", grad_clip);
  ZAYA_CHECK(router_bias_lr >= 0, where, ": field '", field("router_bias_lr"),
             "' must be >= 0, got ", router_bias_lr);
  if (batch_ramp) {
    ZAYA_CHECK(batch_ramp->start_sequences >= 1, where, ": field '",
               field("batch_ramp.start_sequences"), "' must be >= 1, got ",
               batch_ramp->start_sequences);
    ZAYA_CHECK(batch_ramp->ramp_steps >= 0, where, ": field '", field("batch_ramp.ramp_steps"),
               "' must be >= 0, got ", batch_ramp->ramp_steps);
  }
}

}  // namespace zaya
