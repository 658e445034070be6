// `zaya plot`: the loss curve of a run as an SVG picture (train loss, validation loss and, when
// given, a horizontal baseline), drawn from the metrics JSON lines; and the tasks' accuracy.
#pragma once

#include <string>

namespace zaya {

struct PlotOptions {
  std::string title = "zaya training loss";
  double baseline = -1.0;  // e.g. the unigram cross-entropy; < 0 = none
  std::string baseline_label = "unigram baseline";
};

// Writes an SVG to out_path. Throws if the metrics hold no loss values.
void plot_loss_svg(const std::string& metrics_path, const std::string& out_path,
                   const PlotOptions& opt);

// The companion picture of a run with benchmark tasks (train/train_tasks.h): each task's accuracy
// (%) over tokens, with its chance level dashed. False (nothing written) when the metrics hold no
// task results.
bool plot_tasks_svg(const std::string& metrics_path, const std::string& out_path,
                    const std::string& title);

}  // namespace zaya
