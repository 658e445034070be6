// zaya bench gemm and zaya bench membw: the two hardware measurements behind `zaya size`.
#include "cmd_hwbench.h"

#include <omp.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/gemm_bench.h"
#include "bench/membw_bench.h"
#include "core/error.h"
#include "model/config.h"
#include "sizing/model_gemms.h"

namespace zaya::cli {

namespace {

using nlohmann::json;

struct HwBenchArgs {
  std::string device = "cpu", dtype = "f32", shapes = "sweep", json_out;
  int batch = 0, seq = 0;
  double min_time = 0.3;
  MembwOptions membw;
  std::string membw_json;
};

void check_device(const std::string& device, const std::string& dtype) {
  ZAYA_CHECK(device == "cpu" || device == "cuda", "--device: '", device,
             "' is not a device (cpu or cuda)");
  ZAYA_CHECK(device != "cuda",
             "--device cuda: this zaya has no GPU backend yet (docs/status.md: the CUDA/HIP "
             "backend is the next issue); the CPU is the only device it can measure");
  ZAYA_CHECK(dtype == "f32" || dtype == "bf16", "--dtype: '", dtype, "' is not f32 or bf16");
  ZAYA_CHECK(dtype != "bf16",
             "--dtype bf16: the CPU backend computes in f32, and Debian's OpenBLAS 0.3.21 exports "
             "no bf16 product (cblas_sbgemm); bf16 is measured on GPUs");
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

void write_json(const std::string& path, const json& j) {
  std::ofstream out(path);
  ZAYA_CHECK(out.good(), "--json: cannot write '", path, "'");
  out << j.dump(1) << "\n";
  ZAYA_CHECK(out.good(), "--json: writing '", path, "' failed");
}

}  // namespace

Runner add_hwbench_commands(CLI::App& bench) {
  auto args = std::make_shared<HwBenchArgs>();
  auto* gemm = bench.add_subcommand(
      "gemm",
      "Matrix-product throughput of the CPU backend: a size sweep, a grid for zaya size, or the "
      "exact products of a model config");
  gemm->add_option("--device", args->device, "cpu (cuda: not built yet)")->capture_default_str();
  gemm->add_option("--dtype", args->dtype, "f32 (bf16: GPUs only)")->capture_default_str();
  gemm->add_option("--shapes", args->shapes,
                   "sweep (square and unaligned sizes), grid (M, N, K in {16, 64, 256, 1024, "
                   "4096}), model:CONFIG (every product of one micro-batch and of Muon's step), "
                   "or MxNxK,MxNxK,...")
      ->capture_default_str();
  gemm->add_option("--batch", args->batch,
                   "with model:CONFIG, sequences per micro-batch (default: train.micro_batch)");
  gemm->add_option("--seq", args->seq,
                   "with model:CONFIG, tokens per sequence (default: the first phase's seq_len)");
  gemm->add_option("--min-time", args->min_time, "seconds of timed calls per shape")
      ->check(Positive())
      ->capture_default_str();
  gemm->add_option("--json", args->json_out, "also write the results to this JSON file");

  auto* membw = bench.add_subcommand(
      "membw", "Memory bandwidth: STREAM's copy, scale, add and triad per thread count");
  membw->add_option("--device", args->device, "cpu (cuda: not built yet)")->capture_default_str();
  membw
      ->add_option("--elements", args->membw.elements,
                   "doubles per array (default: 4 x the last-level cache, within 2^22 and 2^27)")
      ->check(CLI::Range(int64_t(1) << 10, int64_t(1) << 32));
  membw->add_option("--times", args->membw.times, "runs of each kernel (the first is dropped)")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  membw
      ->add_option("--threads-list", args->membw.threads,
                   "thread counts to measure (default: 1, 2, 4, ... and all)")
      ->delimiter(',');
  membw->add_option("--json", args->membw_json, "also write the results to this JSON file");

  return [=]() -> int {
    if (*gemm) {
      check_device(args->device, args->dtype);
      std::vector<GemmShape> shapes, muon;
      bool model = false;
      int batch = args->batch, seq = args->seq;
      if (args->shapes == "sweep") {
        shapes = gemm_sweep();
      } else if (args->shapes == "grid") {
        shapes = gemm_grid();
      } else if (args->shapes.rfind("model:", 0) == 0) {
        shapes = model_shapes(args->shapes.substr(6), batch, seq, muon);
        model = true;
      } else {
        shapes = parse_gemm_list(args->shapes);
      }
      const int threads = omp_get_max_threads();
      const bool tty = isatty(STDERR_FILENO);
      std::printf("bench gemm: cpu, f32, %d threads (zaya's tiled product on OpenBLAS)%s\n",
                  threads,
                  model ? (", " + args->shapes.substr(6) + ", micro-batch " +
                           std::to_string(batch) + " x " + std::to_string(seq))
                              .c_str()
                        : "");
      json j = {{"device", "cpu"}, {"dtype", "f32"}, {"threads", threads}};
      j["results"] = timings_json(run_gemm_bench(shapes, args->min_time, model, tty, stdout));
      if (model) {
        j["batch"] = batch;
        j["seq"] = seq;
        std::printf("\nMuon (one optimizer step, Newton-Schulz):\n");
        j["muon"] = timings_json(run_gemm_bench(muon, args->min_time, true, tty, stdout));
      }
      if (!args->json_out.empty()) write_json(args->json_out, j);
      return 0;
    }
    if (*membw) {
      check_device(args->device, "f32");
      const std::vector<MembwRow> rows = run_membw_bench(args->membw, stdout);
      if (!args->membw_json.empty()) {
        json r = json::array();
        for (const MembwRow& m : rows)
          r.push_back({{"threads", m.threads},
                       {"copy", m.copy},
                       {"scale", m.scale},
                       {"add", m.add},
                       {"triad", m.triad}});
        write_json(args->membw_json, {{"device", "cpu"}, {"unit", "GB/s"}, {"rows", r}});
      }
      return 0;
    }
    return kNotMine;
  };
}

}  // namespace zaya::cli
