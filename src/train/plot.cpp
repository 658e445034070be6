#include "train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/metrics.h"

namespace zaya {

namespace {

struct Series {
  std::vector<double> x, y;
  std::string color, label;
  double width = 1.2;
  bool dashed = false;
};

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

// A chart of `series` over tokens: grid, ticks, polylines and a legend (series without points
// are left out). The y range is rounded out to multiples of y_round.
void write_chart(const std::string& out_path, const std::string& title, const std::string& ylabel,
                 const std::vector<Series>& series, double y_round) {
  const double W = 800, H = 480, L = 70, R = 20, T = 40, B = 50;
  double x1 = 0, y0 = 1e30, y1 = -1e30;
  for (const Series& s : series) {
    for (double v : s.y) y0 = std::min(y0, v), y1 = std::max(y1, v);
    for (double v : s.x) x1 = std::max(x1, v);
  }
  y0 = std::floor(y0 / y_round) * y_round;
  y1 = std::ceil(y1 / y_round) * y_round;
  if (y1 <= y0) y1 = y0 + y_round;
  if (x1 <= 0) x1 = 1;
  auto px = [&](double x) { return L + (W - L - R) * x / x1; };
  auto py = [&](double y) { return T + (H - T - B) * (1 - (y - y0) / (y1 - y0)); };
  std::ofstream out(out_path);
  ZAYA_CHECK(out.good(), "cannot write plot '", out_path, "'");
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << title
      << "</text>\n";
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
      << ")\" text-anchor=\"middle\">" << ylabel << "</text>\n";
  int legend = 0;
  for (const Series& s : series) {
    if (s.x.empty()) continue;
    const std::string dash = s.dashed ? "\" stroke-dasharray=\"6,4" : "";
    out << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"" << s.width << dash
        << "\" points=\"";
    for (size_t i = 0; i < s.x.size(); ++i) out << px(s.x[i]) << "," << py(s.y[i]) << " ";
    out << "\"/>\n";
    const double y = T + 14 + 18 * legend++;
    out << "<line x1=\"" << W - R - 190 << "\" x2=\"" << W - R - 165 << "\" y1=\"" << y
        << "\" y2=\"" << y << "\" stroke=\"" << s.color << "\" stroke-width=\"2" << dash << "\"/>\n"
        << "<text x=\"" << W - R - 160 << "\" y=\"" << y + 4 << "\">" << s.label << "</text>\n";
  }
  out << "</svg>\n";
  out.close();  // the last bytes are written here: a full disk must not pass as success
  ZAYA_CHECK(!out.fail(), "writing plot '", out_path, "' failed");
}

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

}  // namespace

void plot_loss_svg(const std::string& metrics_path, const std::string& out_path,
                   const PlotOptions& opt) {
  Series train{{}, {}, "#1f77b4", "train loss", 1.2},
      val{{}, {}, "#d62728", "validation loss", 2.0};
  for (const auto& r : read_metrics(metrics_path)) {
    if (!r.contains("tokens")) continue;
    const double t = r["tokens"].get<double>();
    if (r.contains("loss") && r["loss"].is_number())
      train.x.push_back(t), train.y.push_back(r["loss"]);
    if (r.contains("val_loss") && r["val_loss"].is_number())
      val.x.push_back(t), val.y.push_back(r["val_loss"]);
  }
  ZAYA_CHECK(!train.x.empty(), metrics_path, ": no records with 'tokens' and 'loss' to plot");
  std::vector<Series> series = {train, val};
  if (opt.baseline >= 0) {
    const double x1 = std::max(train.x.back(), val.x.empty() ? 0.0 : val.x.back());
    series.push_back({{0, x1},
                      {opt.baseline, opt.baseline},
                      "#555",
                      opt.baseline_label + fmt(" (%.3f)", opt.baseline),
                      1.0,
                      true});
  }
  write_chart(out_path, opt.title, "loss (nats/token)", series, 0.5);
}

bool plot_tasks_svg(const std::string& metrics_path, const std::string& out_path,
                    const std::string& title) {
  std::map<std::string, Series> acc, chance;
  for (const auto& r : read_metrics(metrics_path)) {
    if (!r.contains("tokens") || !r.contains("tasks") || !r["tasks"].is_object()) continue;
    const double t = r["tokens"].get<double>();
    for (const auto& [name, v] : r["tasks"].items()) {
      if (v.contains("acc") && v["acc"].is_number())
        acc[name].x.push_back(t), acc[name].y.push_back(100 * v["acc"].get<double>());
      if (v.contains("chance") && v["chance"].is_number())
        chance[name].x.push_back(t), chance[name].y.push_back(100 * v["chance"].get<double>());
    }
  }
  if (acc.empty()) return false;
  std::vector<Series> series;
  size_t k = 0;
  for (auto& [name, s] : acc) {
    const char* color = kColors[k++ % std::size(kColors)];
    s.color = color, s.label = name + " acc", s.width = 2.0;
    series.push_back(s);
    if (chance.count(name) && !chance[name].x.empty()) {
      Series c = chance[name];
      c.x = {0, c.x.back()}, c.y = {c.y.back(), c.y.back()};
      c.color = color, c.label = name + " chance", c.width = 1.0, c.dashed = true;
      series.push_back(c);
    }
  }
  write_chart(out_path, title, "accuracy (%)", series, 5.0);
  return true;
}

}  // namespace zaya
