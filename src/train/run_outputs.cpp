#include "train/run_outputs.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model/weights_io.h"
#include "model/zaya_model.h"
#include "tokenizer/tokenizer_files.h"
#include "train/plot.h"
#include "train/sampler.h"

namespace zaya {

namespace fs = std::filesystem;

void write_run_outputs(TrainSummary& sum, ZayaModel& model, const TrainConfig& tc,
                       int32_t stop_token, const std::string& config_path) {
  save_model_dir(sum.model_dir, model);
  PlotOptions po;
  po.title = "zaya: " + fs::path(config_path).filename().string();
  po.baseline = sum.unigram_val_loss;
  plot_loss_svg(sum.metrics_path, sum.plot_path, po);
  if (tc.sample_tokens <= 0 || tc.tokenizer.empty()) return;
  const auto tok = load_tokenizer(tc.tokenizer);
  std::ofstream samples(fs::path(tc.out_dir) / "samples.txt");
  for (size_t i = 0; i < tc.sample_prompts.size(); ++i) {
    SampleOptions so;
    so.max_new_tokens = tc.sample_tokens;
    so.temperature = tc.sample_temperature;
    so.top_k = tc.sample_top_k;
    so.seed = tc.seed + i;
    so.stop_token = stop_token;
    const auto ids = generate(model, tok->encode(tc.sample_prompts[i]), so);
    sum.samples.push_back(tok->decode(ids));
    samples << sum.samples.back() << "\n\n";
  }
}

void write_run_summary(const TrainSummary& sum) {
  const nlohmann::json summary = {{"steps", sum.steps},
                                  {"tokens", sum.tokens},
                                  {"final_loss", sum.final_loss},
                                  {"final_val_loss", sum.final_val_loss},
                                  {"unigram_val_loss", sum.unigram_val_loss},
                                  {"interrupted", sum.interrupted},
                                  {"elapsed_s", sum.elapsed_s}};
  std::ofstream(fs::path(sum.out_dir) / "summary.json") << summary.dump(2) << "\n";
}

}  // namespace zaya
