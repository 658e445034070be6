// zaya bench gemm and zaya bench membw: the two hardware measurements behind `zaya size`.
#include "cmd_hwbench.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/blas_report.h"
#include "backend/device_select.h"
#include "backend/plugin_api.h"
#include "backend/vector_path.h"
#include "bench/gemm_bench.h"
#include "bench/membw_bench.h"
#include "core/error.h"
#include "io/output_path.h"
#include "model/config.h"
#include "model/model_gemms.h"

namespace zaya::cli {

namespace {

using nlohmann::json;

struct HwBenchArgs {
  std::string device = "cpu", dtype = "f32", shapes = "sweep", json_out;
  int batch = 0, seq = 0;
  double min_time = 0.3;
  MembwOptions membw;
  std::string membw_json;
  bool force = false;  // --force: --json may replace an existing file
};

// The device timed: one with timings of its own (a plugin's: cuda, cuda-emu), or else the host's
// CPU (zaya's tiled product, STREAM per thread count), which --device cpu names.
const DeviceEntry& timed_device(const std::string& device, const std::string& dtype) {
  ZAYA_CHECK(dtype == "f32" || dtype == "bf16", "--dtype: '", dtype, "' is not f32 or bf16");
  const DeviceEntry& e = chosen_device(device, "--device");
  ZAYA_CHECK(e.caps.timings || !e.caps.own_memory, "--device ", e.name,
             ": no timings of its own (it runs the CPU's ops: time them with --device cpu)");
  ZAYA_CHECK(e.caps.timings || dtype != "bf16",
             "--dtype bf16: the CPU backend computes in f32, and Debian's OpenBLAS 0.3.21 exports "
             "no bf16 product (cblas_sbgemm); bf16 is measured on GPUs (--device cuda)");
  ZAYA_CHECK(e.caps.bf16 || dtype != "bf16", "--dtype bf16: the ", e.name,
             " device computes in fp32");
  return e;
}

// cuBLASLt's time for one shape, with the CPU bench's rules: a warm-up call sizes batches of
// min_time / 3 seconds, and the best of 3 batches counts.
GemmTiming time_gpu_gemm(const BackendPlugin& api, const GemmShape& s, double min_time_s,
                         bool bf16) {
  const double once = std::max(api.time_gemm(s.m, s.n, s.k, s.trans_a, s.trans_b, bf16, 1), 1e-7);
  const int reps = int(std::clamp(min_time_s / 3 / once, 1.0, 1e6));
  double best = 1e300;
  for (int batch = 0; batch < 3; ++batch)
    best = std::min(best, api.time_gemm(s.m, s.n, s.k, s.trans_a, s.trans_b, bf16, reps));
  return {s, best};
}

// STREAM's kernels in device memory: n floats per array, the best of `times` runs after a warm-up,
// bytes counted as STREAM counts them (2 arrays for copy and scale, 3 for add and triad).
MembwRow run_gpu_membw(const BackendPlugin& api, int64_t n, int times) {
  MembwRow row;
  double* rates[4] = {&row.copy, &row.scale, &row.add, &row.triad};
  const double arrays[4] = {2, 2, 3, 3};
  for (int kernel = 0; kernel < 4; ++kernel)
    *rates[kernel] = arrays[kernel] * sizeof(float) * double(n) /
                     api.time_stream_kernel(kernel, size_t(n), times) * 1e-9;
  return row;
}

// The products of one micro-batch of CONFIG (train.micro_batch sequences of the first phase's
// seq_len, unless --batch/--seq say otherwise), then Muon's for one optimizer step.
std::vector<GemmShape> model_shapes(const std::string& path, int& batch, int& seq,
                                    std::vector<GemmShape>& muon) {
  const json root = read_config_file(path);
  const ModelConfig c = model_config_from_json(root.at("model"), path + ": model");
  if (batch <= 0) batch = root.value("/train/micro_batch"_json_pointer, 8);
  if (seq <= 0) {
    const json* phases = root.contains("data") ? &root["data"]["phases"] : nullptr;
    seq = phases && phases->is_array() && !phases->empty()
              ? (*phases)[0].value("seq_len", int(c.max_seq_len))
              : int(c.max_seq_len);
  }
  ZAYA_CHECK(batch > 0 && seq > 0 && int64_t(batch) * seq <= (int64_t(1) << 24), path, ": batch ",
             batch, " x seq ", seq, " is not a micro-batch this bench can time");
  const json* optim =
      root.contains("train") && root["train"].contains("optim") ? &root["train"]["optim"] : nullptr;
  muon = muon_gemms(c, optim ? optim->value("muon_ns_steps", 5) : 5);
  return model_gemms(c, batch, seq);
}

json timings_json(const std::vector<GemmTiming>& t) {
  json rows = json::array();
  for (const GemmTiming& g : t)
    rows.push_back({{"name", g.shape.name},
                    {"m", g.shape.m},
                    {"n", g.shape.n},
                    {"k", g.shape.k},
                    {"trans_a", g.shape.trans_a},
                    {"trans_b", g.shape.trans_b},
                    {"count", g.shape.count},
                    {"seconds", g.seconds},
                    {"gflops", g.gflops()}});
  return rows;
}

OutputRule hwbench_json_rule(const std::string& path, bool force) {
  return {"--json", path, OutputKind::kFile, force, {}};
}

void write_json(const std::string& path, bool force, const json& j) {
  write_output_file(hwbench_json_rule(path, force), j.dump(1) + "\n");
}

// --shapes: the sweep, the grid, a model's products (then `muon` gets Muon's, and batch and seq
// the micro-batch's) or a list; `model` says which.
std::vector<GemmShape> gemm_shapes(const std::string& spec, int& batch, int& seq,
                                   std::vector<GemmShape>& muon, bool& model) {
  model = false;
  if (spec == "sweep") return gemm_sweep();
  if (spec == "grid") return gemm_grid();
  if (spec.rfind("model:", 0) == 0) {
    model = true;
    return model_shapes(spec.substr(6), batch, seq, muon);
  }
  return parse_gemm_list(spec);
}

// zaya bench gemm: the shapes timed on the CPU backend or with cuBLASLt, printed and in --json.
int run_gemm(const HwBenchArgs& a) {
  const DeviceEntry& device = timed_device(a.device, a.dtype);
  std::vector<GemmShape> muon;
  bool model = false;
  int batch = a.batch, seq = a.seq;
  const std::vector<GemmShape> shapes = gemm_shapes(a.shapes, batch, seq, muon, model);
  const int threads = omp_get_max_threads();
  const bool tty = isatty(STDERR_FILENO);
  const std::string what = model ? ", " + a.shapes.substr(6) + ", micro-batch " +
                                       std::to_string(batch) + " x " + std::to_string(seq)
                                 : "";
  json j = {{"device", device.name}, {"dtype", a.dtype}};
  GemmTimer timer;
  if (device.caps.timings) {
    const BackendPlugin& api = device.plugin("--device");
    const bool bf16 = a.dtype == "bf16";
    std::printf("bench gemm: %s (%s), %s (cuBLASLt, fp32 accumulation)%s\n", device.name.c_str(),
                api.device_summary().c_str(), a.dtype.c_str(), what.c_str());
    j["gpu"] = api.device_summary();
    timer = [&api, bf16](const GemmShape& s, double min_time_s) {
      return time_gpu_gemm(api, s, min_time_s, bf16);
    };
  } else {
    std::printf("bench gemm: cpu, f32, %d threads (zaya's tiled product on OpenBLAS)%s\n", threads,
                what.c_str());
    std::printf("%s\n", blas_summary_line().c_str());
    std::printf("%s\n", vector_path_summary_line().c_str());
    j["threads"] = threads;
    j["blas_kernels"] = blas_kernels();
  }
  j["results"] = timings_json(run_gemm_bench(shapes, a.min_time, model, tty, stdout, timer));
  if (model) {
    j["batch"] = batch;
    j["seq"] = seq;
    std::printf("\nMuon (one optimizer step, Newton-Schulz):\n");
    j["muon"] = timings_json(run_gemm_bench(muon, a.min_time, true, tty, stdout, timer));
  }
  if (!a.json_out.empty()) write_json(a.json_out, a.force, j);
  return 0;
}

// zaya bench membw: STREAM per thread count on the CPU, or its kernels in device memory.
int run_membw(const HwBenchArgs& a) {
  const DeviceEntry& device = timed_device(a.device, "f32");
  std::vector<MembwRow> rows;
  if (device.caps.timings) {
    const BackendPlugin& api = device.plugin("--device");
    // 2^27 floats (512 MiB) per array unless --elements says otherwise: far past any cache.
    const int64_t n = a.membw.elements > 0 ? a.membw.elements : int64_t(1) << 27;
    std::printf("bench membw: %s (%s), 3 arrays of %lld floats (%.0f MiB each), best of %d\n",
                device.name.c_str(), api.device_summary().c_str(), (long long)n,
                double(n) * 4 / (1 << 20), a.membw.times);
    rows.push_back(run_gpu_membw(api, n, a.membw.times));
    std::printf("%-8s %10s %10s %10s %10s  (GB/s)\n", "device", "copy", "scale", "add", "triad");
    std::printf("%-8s %10.1f %10.1f %10.1f %10.1f\n", device.name.c_str(), rows[0].copy,
                rows[0].scale, rows[0].add, rows[0].triad);
  } else {
    rows = run_membw_bench(a.membw, stdout);
  }
  if (!a.membw_json.empty()) {
    json r = json::array();
    for (const MembwRow& m : rows)
      r.push_back({{"threads", m.threads},
                   {"copy", m.copy},
                   {"scale", m.scale},
                   {"add", m.add},
                   {"triad", m.triad}});
    write_json(a.membw_json, a.force, {{"device", device.name}, {"unit", "GB/s"}, {"rows", r}});
  }
  return 0;
}

void add_gemm_options(CLI::App& gemm, HwBenchArgs& a) {
  gemm.add_option("--device", a.device,
                  "cpu (zaya's tiled product on OpenBLAS), cuda (cuBLASLt, from the CUDA "
                  "backend plugin) or cuda-emu (the same entry, emulated on OpenBLAS)")
      ->capture_default_str();
  gemm.add_option("--dtype", a.dtype,
                  "f32, or bf16 (inputs and output in bf16, fp32 accumulation; cuda only)")
      ->capture_default_str();
  gemm.add_option("--shapes", a.shapes,
                  "sweep (square and unaligned sizes), grid (M, N, K in {16, 64, 256, 1024, "
                  "4096}), model:CONFIG (every product of one micro-batch and of Muon's step), "
                  "or MxNxK,MxNxK,...")
      ->capture_default_str();
  gemm.add_option("--batch", a.batch,
                  "with model:CONFIG, sequences per micro-batch (default: train.micro_batch)")
      ->check(IntIn(1, 1 << 16));
  gemm.add_option("--seq", a.seq,
                  "with model:CONFIG, tokens per sequence (default: the first phase's seq_len)")
      ->check(IntIn(1, 1 << 24));
  gemm.add_option("--min-time", a.min_time, "seconds of timed calls per shape")
      ->check(Positive())
      ->capture_default_str();
  gemm.add_option("--json", a.json_out, "also write the results to this JSON file")
      ->check(OutputFile());
  gemm.add_flag("--force", a.force, "replace an existing --json file");
}

void add_membw_options(CLI::App& membw, HwBenchArgs& a) {
  membw
      .add_option("--device", a.device,
                  "cpu (per thread count) or cuda (kernels in device memory, float arrays)")
      ->capture_default_str();
  membw
      .add_option("--elements", a.membw.elements,
                  "doubles per array (default: 4 x the last-level cache, within 2^22 and 2^27)")
      ->check(IntIn(int64_t(1) << 10, int64_t(1) << 32));
  membw.add_option("--times", a.membw.times, "runs of each kernel (the first is dropped)")
      ->check(IntIn(2, 1000))
      ->capture_default_str();
  membw
      .add_option("--threads-list", a.membw.threads,
                  "thread counts to measure (default: 1, 2, 4, ... and all)")
      ->delimiter(',')
      ->check(IntIn(1, 4096));
  membw.add_option("--json", a.membw_json, "also write the results to this JSON file")
      ->check(OutputFile());
  membw.add_flag("--force", a.force, "replace an existing --json file");
}

}  // namespace

Runner add_hwbench_commands(CLI::App& bench) {
  auto args = std::make_shared<HwBenchArgs>();
  auto* gemm = bench.add_subcommand("gemm",
                                    "Matrix-product throughput (the CPU backend, or cuBLASLt with "
                                    "--device cuda): a size sweep, a grid for zaya size, or the "
                                    "exact products of a model config");
  add_gemm_options(*gemm, *args);
  auto* membw = bench.add_subcommand(
      "membw", "Memory bandwidth: STREAM's copy, scale, add and triad per thread count");
  add_membw_options(*membw, *args);
  return [=]() -> int {
    // Checked before the benchmark runs, so a refused --json costs nothing.
    if (*gemm && !args->json_out.empty())
      check_output(hwbench_json_rule(args->json_out, args->force));
    if (*membw && !args->membw_json.empty())
      check_output(hwbench_json_rule(args->membw_json, args->force));
    if (*gemm) return run_gemm(*args);
    if (*membw) return run_membw(*args);
    return kNotMine;
  };
}

}  // namespace zaya::cli
