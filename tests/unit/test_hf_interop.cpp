// Checkpoints <-> HF model directories: a 3-rank checkpoint exported (sharded) and imported back
// keeps every weight bitwise; load_model_any reads all three forms; score_tokens' outputs agree
// with each other and the token files parse as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ckpt/hf_interop.h"
#include "eval/score.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"
#include "test_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;
using test::tiny_config;

bool same_weights(const ParamStore& a, const ParamStore& b) {
  return a.size() == b.size() && std::memcmp(a.weights(), b.weights(), a.size() * 4) == 0;
}

// A checkpoint of `world` ranks with non-trivial weights, as the trainer writes it.
std::string write_test_checkpoint(const fs::path& root, const ParamStore& params, int world) {
  const OptimConfig oc = optim_config_from_json(json::object(), "test");
  const Optimizer opt(params.registry(), oc);
  const RouterBalancer bal(params.registry(), oc);
  TrainerState st;
  st.step = 12;
  st.config = {{"model", model_config_to_json(tiny_config())}, {"train", json::object()}};
  return write_checkpoint(root.string(), take_snapshot(params, opt, bal, st), world);
}

TEST(HfInterop, ExportImportRoundTripFromThreeRanksIsBitwise) {
  const fs::path dir = test::temp_dir("hf_interop");
  ParamStore params(tiny_config());
  params.init(11);
  for (const ParamSpec& spec : params.registry().specs())  // the padding between them stays 0
    for (size_t i = spec.offset; i < spec.offset + size_t(spec.numel); ++i)
      params.weights()[i] += float(i % 17) * 1e-3f;
  const std::string ck = write_test_checkpoint(dir / "run", params, 3);

  HfWriteOptions opt;
  opt.max_shard_bytes = 50000;
  export_checkpoint_to_hf(ck, (dir / "hf").string(), opt);
  EXPECT_TRUE(fs::exists(dir / "hf" / "model.safetensors.index.json"));
  LoadedModel hf = load_model_any((dir / "hf").string());
  EXPECT_EQ(hf.kind, "hf");
  EXPECT_TRUE(same_weights(hf.model->params(), params));

  const std::string imported =
      import_hf_to_checkpoint((dir / "hf").string(), (dir / "imported").string());
  EXPECT_EQ(fs::path(imported).filename(), "step-00000000");
  const LoadedCheckpoint back = load_checkpoint(imported);
  EXPECT_EQ(back.state.step, 0);
  EXPECT_EQ(back.state.config["model"], model_config_to_json(tiny_config()));
  for (const auto& [name, t] : back.tensors) {
    if (!name.starts_with("exp_avg")) continue;
    for (int64_t k = 0; k < t.numel(); ++k) ASSERT_EQ(t.data<float>()[k], 0.0f) << name;
  }

  // The checkpoint directory, and the root holding it, load the same weights.
  for (const fs::path& p : {fs::path(imported), dir / "imported", dir / "run"}) {
    LoadedModel m = load_model_any(p.string());
    EXPECT_EQ(m.kind, "checkpoint") << p;
    EXPECT_TRUE(same_weights(m.model->params(), params)) << p;
  }
  EXPECT_EQ(load_model_any((dir / "run").string()).path, ck);
  fs::remove_all(dir);
}

TEST(HfInterop, LoadModelAnyNamesWhatItAccepts) {
  const fs::path dir = test::temp_dir("hf_any");
  std::string e = error_of([&] { load_model_any((dir / "nope").string()); });
  EXPECT_NE(e.find("is not a directory"), std::string::npos) << e;
  e = error_of([&] { load_model_any(dir.string()); });
  EXPECT_NE(e.find("no config.json"), std::string::npos) << e;
  // A checkpoint whose config lacks the model section.
  ParamStore params(tiny_config());
  const OptimConfig oc = optim_config_from_json(json::object(), "test");
  TrainerState st;
  st.config = {{"train", json::object()}};
  const std::string ck = write_checkpoint((dir / "ck").string(),
                                          take_snapshot(params, Optimizer(params.registry(), oc),
                                                        RouterBalancer(params.registry(), oc), st));
  e = error_of([&] { load_model_any(ck); });
  EXPECT_NE(e.find("'config.model'"), std::string::npos) << e;
  fs::remove_all(dir);
}

TEST(Score, LogProbsLossAndGradsAgree) {
  ZayaModel model(tiny_config());
  model.params().init(2);
  TokenBatch batch{{2, 17, 5, 96, 40, 3, 3, 81, 0, 9}, 2, 5};
  const ScoreResult r = score_tokens(model, batch, true);
  ASSERT_EQ(r.logits.shape(), (Shape{2, 5, 97}));
  ASSERT_EQ(r.log_probs.shape(), (Shape{2, 4}));
  // The loss is the mean negative log-probability of the 8 labelled positions, and each one is
  // log_softmax of its row at the next token (checked here in double from the logits).
  double sum = 0;
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < 4; ++s) {
      const float* x = r.logits.data<float>() + (b * 5 + s) * 97;
      double z = 0;
      for (int v = 0; v < 97; ++v) z += std::exp(double(x[v]));
      const double want = double(x[batch.tokens[size_t(b * 5 + s + 1)]]) - std::log(z);
      EXPECT_NEAR(r.log_probs.data<float>()[b * 4 + s], want, 1e-5);
      sum -= want;
    }
  EXPECT_NEAR(r.loss, sum / 8, 1e-5);
  // One gradient per trained parameter, none for the balancing biases.
  size_t trained = 0;
  for (const ParamSpec& s : model.params().registry().specs()) trained += s.trainable();
  EXPECT_EQ(r.grads.size(), trained);
  for (const auto& [name, g] : r.grads) EXPECT_EQ(name.find("balancing_biases"), std::string::npos);
  EXPECT_NE(error_of([&] {
              score_tokens(model, TokenBatch{{1, 2}, 2, 1}, false);
            }).find("at least 2 tokens"),
            std::string::npos);
}

TEST(Score, TokenFiles) {
  const fs::path dir = test::temp_dir("tokfile");
  auto parse = [&](const std::string& text) {
    std::ofstream(dir / "t.json") << text;
    return read_token_file((dir / "t.json").string());
  };
  TokenBatch one = parse("[5, 6, 7]");
  EXPECT_EQ(one.batch, 1);
  EXPECT_EQ(one.seq, 3);
  EXPECT_EQ(one.tokens, (std::vector<int32_t>{5, 6, 7}));
  TokenBatch two = parse("[[1, 2], [3, 4]]");
  EXPECT_EQ(two.batch, 2);
  EXPECT_EQ(two.tokens, (std::vector<int32_t>{1, 2, 3, 4}));
  auto err = [&](const std::string& text) { return error_of([&] { parse(text); }); };
  EXPECT_NE(err("[[1, 2], [3]]").find("sequence 1 has 1 tokens"), std::string::npos);
  EXPECT_NE(err("[1, -2]").find("token 1 = -2"), std::string::npos);
  EXPECT_NE(err("[1, 2.5]").find("token 1 = 2.5"), std::string::npos);
  EXPECT_NE(err("{}").find("expected a list"), std::string::npos);
  EXPECT_NE(err("[1, ").find("malformed JSON"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zaya
