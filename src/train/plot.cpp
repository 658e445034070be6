#include "train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "train/metrics.h"

namespace zaya {

namespace {

struct Series {
  std::vector<double> x, y;
};

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

}  // namespace

void plot_loss_svg(const std::string& metrics_path, const std::string& out_path,
                   const PlotOptions& opt) {
  Series train, val;
  for (const auto& r : read_metrics(metrics_path)) {
    if (!r.contains("tokens")) continue;
    const double t = r["tokens"].get<double>();
    if (r.contains("loss") && r["loss"].is_number())
      train.x.push_back(t), train.y.push_back(r["loss"]);
    if (r.contains("val_loss") && r["val_loss"].is_number())
      val.x.push_back(t), val.y.push_back(r["val_loss"]);
  }
  ZAYA_CHECK(!train.x.empty(), metrics_path, ": no records with 'tokens' and 'loss' to plot");
  const double W = 800, H = 480, L = 70, R = 20, T = 40, B = 50;
  double x1 = train.x.back(), y0 = 1e30, y1 = -1e30;
  for (const Series* s : {&train, &val}) {
    for (double v : s->y) y0 = std::min(y0, v), y1 = std::max(y1, v);
    if (!s->x.empty()) x1 = std::max(x1, s->x.back());
  }
  if (opt.baseline >= 0) y0 = std::min(y0, opt.baseline), y1 = std::max(y1, opt.baseline);
  y0 = std::floor(y0 * 2) / 2;
  y1 = std::ceil(y1 * 2) / 2;
  if (y1 <= y0) y1 = y0 + 1;
  if (x1 <= 0) x1 = 1;
  auto px = [&](double x) { return L + (W - L - R) * x / x1; };
  auto py = [&](double y) { return T + (H - T - B) * (1 - (y - y0) / (y1 - y0)); };
  std::ofstream out(out_path);
  ZAYA_CHECK(out.good(), "cannot write plot '", out_path, "'");
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << opt.title << "</text>\n";
  for (int i = 0; i <= 5; ++i) {  // grid and tick labels
    const double yv = y0 + (y1 - y0) * i / 5, xv = x1 * i / 5;
    out << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << py(yv) << "\" y2=\"" << py(yv)
        << "\" stroke=\"#ddd\"/>\n"
        << "<text x=\"" << L - 6 << "\" y=\"" << py(yv) + 4 << "\" text-anchor=\"end\">"
        << fmt("%.2f", yv) << "</text>\n"
        << "<text x=\"" << px(xv) << "\" y=\"" << H - B + 18 << "\" text-anchor=\"middle\">"
        << (x1 >= 1e6 ? fmt("%.1fM", xv / 1e6) : fmt("%.0fk", xv / 1e3)) << "</text>\n";
  }
  out << "<text x=\"" << W / 2 << "\" y=\"" << H - 10 << "\" text-anchor=\"middle\">tokens</text>\n"
      << "<text x=\"16\" y=\"" << H / 2 << "\" transform=\"rotate(-90 16 " << H / 2
      << ")\" text-anchor=\"middle\">loss (nats/token)</text>\n";
  auto polyline = [&](const Series& s, const char* color, double width) {
    if (s.x.empty()) return;
    out << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"" << width
        << "\" points=\"";
    for (size_t i = 0; i < s.x.size(); ++i) out << px(s.x[i]) << "," << py(s.y[i]) << " ";
    out << "\"/>\n";
  };
  polyline(train, "#1f77b4", 1.2);
  polyline(val, "#d62728", 2.0);
  int legend = 0;
  auto key = [&](const char* color, const std::string& label) {
    const double y = T + 14 + 18 * legend++;
    out << "<line x1=\"" << W - R - 190 << "\" x2=\"" << W - R - 165 << "\" y1=\"" << y
        << "\" y2=\"" << y << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n"
        << "<text x=\"" << W - R - 160 << "\" y=\"" << y + 4 << "\">" << label << "</text>\n";
  };
  key("#1f77b4", "train loss");
  if (!val.x.empty()) key("#d62728", "validation loss");
  if (opt.baseline >= 0) {
    out << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << py(opt.baseline) << "\" y2=\""
        << py(opt.baseline) << "\" stroke=\"#555\" stroke-dasharray=\"6,4\"/>\n";
    key("#555", opt.baseline_label + fmt(" (%.3f)", opt.baseline));
  }
  out << "</svg>\n";
  ZAYA_CHECK(out.good(), "writing plot '", out_path, "' failed");
}

}  // namespace zaya
