// Learning-rate schedules, the batch-size ramp, and the "optim" config parser.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "optim/optim_config.h"
#include "optim/schedule.h"
#include "train/train_config.h"

namespace zaya {
namespace {

OptimConfig base(LrSchedule s) {
  OptimConfig c;
  c.lr = 1e-3;
  c.min_lr = 1e-4;
  c.warmup_steps = 100;
  c.schedule = s;
  c.decay_fraction = 0.2;
  return c;
}

TEST(LearningRate, WarmupIsLinearFromZero) {
  for (LrSchedule s : {LrSchedule::Cosine, LrSchedule::Wsd, LrSchedule::Constant}) {
    const OptimConfig c = base(s);
    EXPECT_DOUBLE_EQ(learning_rate(c, 0, 1000), 0.0) << lr_schedule_name(s);
    EXPECT_DOUBLE_EQ(learning_rate(c, 50, 1000), 5e-4) << lr_schedule_name(s);
    EXPECT_DOUBLE_EQ(learning_rate(c, 100, 1000), 1e-3) << lr_schedule_name(s);
  }
}

TEST(LearningRate, CosineDecaysToMinLr) {
  const OptimConfig c = base(LrSchedule::Cosine);
  EXPECT_DOUBLE_EQ(learning_rate(c, 550, 1000), 5.5e-4);  // halfway: (lr + min_lr)/2
  EXPECT_DOUBLE_EQ(learning_rate(c, 1000, 1000), 1e-4);
  EXPECT_DOUBLE_EQ(learning_rate(c, 5000, 1000), 1e-4);  // past the end it stays there
  EXPECT_GT(learning_rate(c, 999, 1000), 1e-4);
  for (int64_t s = 101; s <= 1000; ++s)
    EXPECT_LE(learning_rate(c, s, 1000), learning_rate(c, s - 1, 1000)) << s;
}

TEST(LearningRate, WsdPlateauThenLinearDecay) {
  const OptimConfig c = base(LrSchedule::Wsd);  // decay over the last 200 of 1000 steps
  EXPECT_DOUBLE_EQ(learning_rate(c, 101, 1000), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(c, 799, 1000), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(c, 800, 1000), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(c, 801, 1000), 1e-3 - 9e-4 / 200);  // decay starts at once
  EXPECT_DOUBLE_EQ(learning_rate(c, 900, 1000), 5.5e-4);
  EXPECT_DOUBLE_EQ(learning_rate(c, 1000, 1000), 1e-4);
  OptimConfig overlap = c;
  overlap.decay_fraction = 0.95;  // decay would start inside the warm-up
  EXPECT_THROW(learning_rate(overlap, 0, 1000), Error);
}

TEST(LearningRate, ConstantAndBadArguments) {
  const OptimConfig c = base(LrSchedule::Constant);
  EXPECT_DOUBLE_EQ(learning_rate(c, 999, 1000), 1e-3);
  EXPECT_THROW(learning_rate(c, 0, 0), Error);
  EXPECT_THROW(learning_rate(c, -1, 1000), Error);
  EXPECT_THROW(learning_rate(c, 0, 50), Error);  // warm-up longer than the run
}

TEST(BatchRamp, GrowsLinearlyInWholeMicroBatches) {
  OptimConfig c;
  EXPECT_EQ(batch_sequences(c, 0, 64, 4), 64);  // no ramp configured
  c.batch_ramp = BatchRamp{8, 100};
  EXPECT_EQ(batch_sequences(c, 0, 64, 4), 8);
  EXPECT_EQ(batch_sequences(c, 10, 64, 4), 12);  // 8 + 56·0.1 = 13.6 → 13 → nearest multiple 12
  EXPECT_EQ(batch_sequences(c, 50, 64, 4), 36);  // 8 + 28
  EXPECT_EQ(batch_sequences(c, 99, 64, 4), 64);  // 63.44 → 63 → 64
  EXPECT_EQ(batch_sequences(c, 100, 64, 4), 64);
  EXPECT_EQ(batch_sequences(c, 1000, 64, 4), 64);
  c.batch_ramp = BatchRamp{1, 100};
  EXPECT_EQ(batch_sequences(c, 0, 64, 8), 8);  // never below one micro-batch
  for (int64_t s = 0; s < 120; ++s) {
    const int64_t b = batch_sequences(c, s, 64, 8);
    EXPECT_EQ(b % 8, 0) << s;
    if (s > 0) {
      EXPECT_GE(b, batch_sequences(c, s - 1, 64, 8)) << s;
    }
  }
  EXPECT_THROW(batch_sequences(c, 0, 60, 8), Error);  // global not a multiple of micro
  EXPECT_THROW(batch_sequences(c, 0, 64, 0), Error);
}

TEST(OptimConfig, ParsesFieldsAndKeepsDefaults) {
  const auto j = nlohmann::json::parse(R"({"lr": 2e-3, "schedule": "wsd", "warmup_steps": 10,
      "muon_nesterov": false, "batch_ramp": {"start_sequences": 16, "ramp_steps": 500}})");
  const OptimConfig c = optim_config_from_json(j, "config.json");
  EXPECT_DOUBLE_EQ(c.lr, 2e-3);
  EXPECT_EQ(c.schedule, LrSchedule::Wsd);
  EXPECT_EQ(c.warmup_steps, 10);
  EXPECT_FALSE(c.muon_nesterov);
  ASSERT_TRUE(c.batch_ramp.has_value());
  EXPECT_EQ(c.batch_ramp->start_sequences, 16);
  EXPECT_EQ(c.batch_ramp->ramp_steps, 500);
  EXPECT_DOUBLE_EQ(c.muon_momentum, 0.95);
  EXPECT_EQ(c.muon_ns_steps, 5);
  EXPECT_DOUBLE_EQ(c.router_bias_lr, 1e-3);
}

// Each bad config must fail with a message that names the field.
TEST(OptimConfig, BadFieldsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"lr_max": 1})", "config.json: unknown field 'train.optim.lr_max'"},
      {R"({"lr": -1})", "'train.optim.lr' must be > 0"},
      {R"({"lr": "big"})", "'train.optim.lr' must be a finite number"},
      {R"({"min_lr": 1})", "'train.optim.min_lr' must be in [0, lr"},
      {R"({"schedule": "linear"})", "'train.optim.schedule' must be"},
      {R"({"warmup_steps": 1.5})", "'train.optim.warmup_steps' must be an integer"},
      {R"({"adam_beta2": 1.0})", "'train.optim.adam_beta2' must be in [0, 1)"},
      {R"({"muon_momentum": -0.1})", "'train.optim.muon_momentum' must be in [0, 1)"},
      {R"({"muon_nesterov": 1})", "'train.optim.muon_nesterov' must be true or false"},
      {R"({"muon_ns_steps": 0})", "'train.optim.muon_ns_steps' must be in [1, 100]"},
      {R"({"grad_clip": -1})", "'train.optim.grad_clip' must be >= 0"},
      {R"({"decay_fraction": 0})", "'train.optim.decay_fraction' must be in (0, 1]"},
      {R"({"adam_eps": 0})", "'train.optim.adam_eps' must be > 0"},
      {R"({"weight_decay": -0.1})", "'train.optim.weight_decay' must be >= 0"},
      {R"({"router_bias_beta1": 2})", "'train.optim.router_bias_beta1' must be in [0, 1)"},
      {R"({"batch_ramp": {"start_sequences": 4}})",
       "missing field 'train.optim.batch_ramp.ramp_steps'"},
      {R"({"batch_ramp": {"start_sequences": 4, "ramp_steps": 5, "x": 1}})",
       "unknown field 'train.optim.batch_ramp.x'"},
      {R"({"batch_ramp": {"start_sequences": 0, "ramp_steps": 5}})",
       "'train.optim.batch_ramp.start_sequences' must be >= 1"},
      {R"([1, 2])", "'train.optim' must be a JSON object"},
  };
  for (const auto& [text, expected] : cases) {
    try {
      optim_config_from_json(nlohmann::json::parse(text), "config.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
          << text << " → " << e.what();
    }
  }
}

}  // namespace
}  // namespace zaya

namespace zaya {
namespace {

// train.recompute: the three modes by name, true / false as full / none, and anything else named.
TEST(TrainConfig, RecomputeModes) {
  const std::pair<const char*, Recompute> good[] = {
      {R"({"recompute": "none"})", Recompute::kNone},
      {R"({"recompute": "selective"})", Recompute::kSelective},
      {R"({"recompute": "full"})", Recompute::kFull},
      {R"({"recompute": true})", Recompute::kFull},
      {R"({"recompute": false})", Recompute::kNone},
      {R"({})", Recompute::kNone}};
  for (const auto& [text, mode] : good)
    EXPECT_EQ(train_config_from_json(nlohmann::json::parse(text), "c.json").recompute,
              RecomputePlan(mode))
        << text;
  // Each kind of stage its own; an absent kind keeps everything.
  EXPECT_EQ(
      train_config_from_json(
          nlohmann::json::parse(R"({"recompute": {"attention": "full", "moe": "selective"}})"),
          "c.json")
          .recompute,
      RecomputePlan(Recompute::kFull, Recompute::kSelective));
  EXPECT_EQ(
      train_config_from_json(nlohmann::json::parse(R"({"recompute": {"moe": "full"}})"), "c.json")
          .recompute,
      RecomputePlan(Recompute::kNone, Recompute::kFull));
  try {
    train_config_from_json(nlohmann::json::parse(R"({"recompute": {"cca": "full"}})"), "c.json");
    ADD_FAILURE() << "accepted an unknown stage kind";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'train.recompute': unknown stage kind 'cca'"),
              std::string::npos)
        << e.what();
  }
  for (const char* bad : {R"({"recompute": "some"})", R"({"recompute": 1})"}) {
    try {
      train_config_from_json(nlohmann::json::parse(bad), "c.json");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("c.json: field 'train.recompute' must be one of full, "
                                           "none, selective"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace zaya
