// zaya plot --metrics METRICS.jsonl --out PLOT.svg [--baseline LOSS] [--force]
#include "cmd_plot.h"

#include <cstdio>
#include <memory>
#include <string>

#include "io/output_path.h"
#include "train/plot.h"

namespace zaya::cli {

namespace {

struct PlotArgs {
  std::string metrics, out;
  double baseline = -1;
  bool force = false;
};

}  // namespace

Runner add_plot_command(CLI::App& app) {
  auto args = std::make_shared<PlotArgs>();
  auto* plot = app.add_subcommand("plot", "Draw a run's loss curve (metrics.jsonl) as SVG");
  plot->add_option("--metrics", args->metrics, "metrics JSON lines of a run")
      ->required()
      ->check(ExistingFile());
  plot->add_option("--out", args->out, "output .svg")->required()->check(OutputFile());
  plot->add_option("--baseline", args->baseline, "draw a horizontal baseline at this loss");
  plot->add_flag("--force", args->force, "replace an existing --out file");
  return [=]() -> int {
    if (!*plot) return kNotMine;
    PlotOptions po;
    po.baseline = args->baseline;
    StagedOutput out({"--out", args->out, OutputKind::kFile, args->force, {args->metrics}});
    plot_loss_svg(args->metrics, out.path(), po);
    out.commit();
    std::printf("wrote %s\n", args->out.c_str());
    return 0;
  };
}

}  // namespace zaya::cli
