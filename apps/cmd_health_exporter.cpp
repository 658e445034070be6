// zaya health-exporter: this machine's GPU health (aegis/gpu_health.h: NVML or AMD SMI, loaded
// at run time) served at GET /metrics in Prometheus' text format, read on each request. A
// supervisor on
// another host reads it as it reads a node exporter (zaya aegis --node-exporter HOST=URL), and a
// Prometheus server can scrape it beside node_exporter.
#include "cmd_health_exporter.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "aegis/gpu_health.h"
#include "serve/train_metrics.h"

namespace zaya::cli {

namespace {

struct ExporterArgs {
  std::string gpu = "nvml";
  std::string host = "127.0.0.1";
  int port = 9400;
};

// What each series says, for its HELP line.
const char* help_of(const std::string& name) {
  static const std::map<std::string, const char*> help = {
      {"zaya_gpu_ecc_errors_total", "ECC errors over the device's life, by type"},
      {"zaya_gpu_retired_pages", "Memory pages retired, by cause"},
      {"zaya_gpu_remapped_rows", "Memory rows remapped, by cause"},
      {"zaya_gpu_row_remap_pending", "1: a row remapping waits for a GPU reset"},
      {"zaya_gpu_row_remap_failed", "1: a row remapping failed"},
      {"zaya_gpu_xid_errors_total", "Critical Xid events since the exporter started"},
      {"zaya_gpu_last_xid", "The last critical Xid event's code"},
      {"zaya_gpu_temperature_celsius", "The GPU die's temperature"},
      {"zaya_gpu_throttled", "1: the clocks are held down now, by reason"},
      {"zaya_gpu_lost", "1: the GPU has fallen off the bus"}};
  const auto it = help.find(name);
  return it == help.end() ? "GPU health" : it->second;
}

// Samples as metric families in their order of first appearance; counters by their _total.
std::string to_text(const std::vector<aegis::MetricSample>& samples) {
  std::vector<prometheus::MetricFamily> families;
  std::map<std::string, size_t> index;
  for (const aegis::MetricSample& s : samples) {
    auto [it, fresh] = index.try_emplace(s.name, families.size());
    if (fresh) {
      prometheus::MetricFamily f;
      f.name = s.name;
      f.help = help_of(s.name);
      f.type = s.name.ends_with("_total") ? prometheus::MetricType::Counter
                                          : prometheus::MetricType::Gauge;
      families.push_back(std::move(f));
    }
    prometheus::MetricFamily& f = families[it->second];
    prometheus::ClientMetric m;
    for (const auto& [k, v] : s.labels) m.label.push_back({k, v});
    if (f.type == prometheus::MetricType::Counter)
      m.counter.value = s.value;
    else
      m.gauge.value = s.value;
    f.metric.push_back(std::move(m));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace

Runner add_health_exporter_command(CLI::App& app) {
  auto a = std::make_shared<ExporterArgs>();
  auto* cmd =
      app.add_subcommand("health-exporter",
                         "Serve this machine's GPU health (NVML or AMD SMI, loaded at run time) at "
                         "http://HOST:PORT/metrics "
                         "for zaya aegis --node-exporter on another host, or for Prometheus");
  cmd->add_option("--gpu", a->gpu,
                  "nvml (NVIDIA) or amdsmi (AMD), or either as KIND:PATH to load that file")
      ->capture_default_str();
  cmd->add_option("--host", a->host, "the address to listen on (0.0.0.0 for every interface)")
      ->capture_default_str();
  cmd->add_option("--port", a->port, "the port (0: any free port, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  return [=]() -> int {
    if (!*cmd) return kNotMine;
    // The signals that stop it, blocked before any thread starts so that sigwait receives them.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    std::shared_ptr<aegis::GpuHealthLibrary> library = aegis::open_gpu_library(a->gpu, "--gpu");
    library->read();  // a library that opens but cannot be read: now, not at the first scrape
    auto mutex = std::make_shared<std::mutex>();
    serve::MetricsEndpoint endpoint(a->host, a->port, [library, mutex] {
      std::lock_guard<std::mutex> lock(*mutex);
      return to_text(library->read());
    });
    std::printf("zaya health-exporter: %s at http://%s:%d/metrics\n", library->describe().c_str(),
                a->host.c_str(), endpoint.port());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    return 0;
  };
}

}  // namespace zaya::cli
