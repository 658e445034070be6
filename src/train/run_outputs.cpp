#include "train/run_outputs.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "backend/blas_report.h"
#include "backend/vector_path.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "model/weights_io.h"
#include "model/zaya_model.h"
#include "tokenizer/tokenizer.h"
#include "train/plot.h"
#include "train/sampler.h"
#include "train/step_accounting.h"

namespace zaya {

namespace fs = std::filesystem;

void write_run_outputs(TrainSummary& sum, ZayaModel& model, const TrainConfig& tc,
                       const Tokenizer* tok, int32_t stop_token, const std::string& config_path) {
  // The model first: whatever fails after it (the plot, the samples) costs a warning, never the
  // trained weights.
  save_model_dir(sum.model_dir, model);
  try {
    PlotOptions po;
    po.title = "zaya: " + fs::path(config_path).filename().string();
    po.baseline = sum.unigram_val_loss;
    plot_loss_svg(sum.metrics_path, sum.plot_path, po);
    if (!sum.tasks.is_null()) {
      const std::string tasks_plot = (fs::path(sum.out_dir) / "tasks.svg").string();
      if (plot_tasks_svg(sum.metrics_path, tasks_plot, po.title + ", benchmark tasks"))
        sum.tasks_plot_path = tasks_plot;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: the loss plot was not drawn: %s\n", e.what());
  }
  // A run stopped by a signal has little time left before the scheduler's SIGKILL: no samples.
  if (tc.sample_tokens <= 0 || tok == nullptr || sum.interrupted) return;
  try {
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: no samples: %s\n", e.what());
  }
}

void gather_memory_summary(TrainSummary& summary, dist::Communicator& comm,
                           const ComputeDevice& device) {
  const MemoryNow own = memory_now(device);
  const int world = comm.world_size();
  static_assert(sizeof(int64_t) == 2 * sizeof(int32_t));  // moved as two int32 (bytes only)
  summary.peak_rss_bytes.assign(size_t(world), 0);
  comm.all_gather(&own.peak_rss_bytes, summary.peak_rss_bytes.data(), 2, DType::I32);
  summary.device_peak_bytes.assign(size_t(world), 0);
  comm.all_gather(&own.device_peak_bytes, summary.device_peak_bytes.data(), 2, DType::I32);
}

void write_run_summary(const TrainSummary& sum) {
  nlohmann::json summary = {
      {"steps", sum.steps},
      {"tokens", sum.tokens},
      {"final_loss", sum.final_loss},
      {"final_val_loss", sum.final_val_loss},
      {"unigram_val_loss", sum.unigram_val_loss},
      {"interrupted", sum.interrupted},
      {"stop_signal", sum.stop_signal},
      {"elapsed_s", sum.elapsed_s},
      {"train_s", sum.train_s},
      {"grad_reduce_wait_s", sum.grad_reduce_wait_s},
      {"peak_tflops", sum.peak_tflops},
      {"peak_source", sum.peak_source},
      {"mfu", sum.mfu},
      {"device", sum.device},
      {"peak_rss_bytes_per_rank", sum.peak_rss_bytes},
      {"device_peak_bytes_per_rank", sum.device_peak_bytes},
      {"device_plan_bytes", sum.device_plan_bytes},
      {"activation_bytes", sum.activation_bytes},
      {"device_weight_bytes", sum.device_weight_bytes},
      {"device_grad_bytes", sum.device_grad_bytes},
      {"blas", blas_json()},  // the BLAS kernels and why: their runs differ in last bits
      {"vector_path", vector_path_name(active_vector_path().path)}};
  if (!sum.tasks.is_null()) summary["tasks"] = sum.tasks;  // the last evaluation of each task
  // Written beside and renamed over: a kill mid-write leaves the previous summary, never half.
  const fs::path path = fs::path(sum.out_dir) / "summary.json", tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << summary.dump(2) << "\n";
    ZAYA_CHECK(out.good(), "writing ", tmp.string(), " failed (disk full?)");
  }
  fs::rename(tmp, path);
}

}  // namespace zaya
