// `zaya plot`: the loss curve of a run as an SVG picture (train loss, validation loss and, when
// given, a horizontal baseline), drawn from the metrics JSON lines.
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

}  // namespace zaya
