// zaya: the command-line front. It only parses arguments and calls into the library: each
// command registers itself from its apps/cmd_*.cpp (apps/commands.h), and main wires them.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>
#include <CLI/CLI.hpp>

#include "backend/blas_report.h"
#include "backend/vector_path.h"
#include "cmd_aegis.h"
#include "cmd_ckpt.h"
#include "cmd_comm.h"
#include "cmd_data.h"
#include "cmd_debug_dump.h"
#include "cmd_decode_bench.h"
#include "cmd_eval.h"
#include "cmd_forward.h"
#include "cmd_generate.h"
#include "cmd_health_exporter.h"
#include "cmd_hwbench.h"
#include "cmd_info.h"
#include "cmd_plot.h"
#include "cmd_sample.h"
#include "cmd_score.h"
#include "cmd_serve.h"
#include "cmd_size.h"
#include "cmd_step_bench.h"
#include "cmd_tokenizer.h"
#include "cmd_train.h"
#include "core/error.h"
#include "dist/dist_context.h"

namespace {

// OpenBLAS itself always runs single-threaded: backend/cpu/matmul.cpp cuts every product into tiles
// by its shape and runs the tiles on the OpenMP threads, so results do not depend on this count.
void set_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

// Every command, in the order --help lists them (a braced list runs its calls in order).
std::vector<zaya::cli::Runner> add_commands(CLI::App& app) {
  using namespace zaya::cli;
  std::vector<Runner> runners{add_info_command(app)};
  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  const std::vector<Runner> rest{
      add_step_bench_command(*bench), add_debug_dump_command(app),      add_forward_command(app),
      add_tokenizer_commands(app),    add_data_commands(app),           add_train_command(app),
      add_plot_command(app),          add_sample_command(app),          add_ckpt_commands(app),
      add_aegis_commands(app),        add_health_exporter_command(app), add_score_commands(app),
      add_eval_commands(app),         add_serve_commands(app),          add_comm_commands(*bench),
      add_hwbench_commands(*bench),   add_decode_bench_command(*bench), add_size_commands(app),
      add_generate_commands(app)};
  runners.insert(runners.end(), rest.begin(), rest.end());
  return runners;
}

// The CPU ops' vector path (backend/vector_path.h): --vector-path when given, else
// ZAYA_VECTOR_PATH, else the best this CPU runs. Exported to the environment so that the processes
// zaya starts (aegis's jobs, mpirun's ranks) take the same path.
void choose_process_vector_path(const CLI::App& app, const std::string& flag) {
  const bool given = app.count("--vector-path") > 0;
  const char* env = std::getenv("ZAYA_VECTOR_PATH");
  const std::string request = given ? flag : (env != nullptr && *env != '\0' ? env : "auto");
  zaya::set_active_vector_path(zaya::choose_vector_path(
      request, given ? "--vector-path" : (request == "auto" ? "auto" : "ZAYA_VECTOR_PATH")));
  if (given) setenv("ZAYA_VECTOR_PATH", flag.c_str(), 1);
}

// Parses the command line; returns the exit code when the process ends here (--help, --version,
// a parse error).
std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A mistyped subcommand is left over as an extra argument; say so instead of CLI11's "A
    // subcommand is required".
    if (app.get_subcommands().empty() && !app.remaining().empty() &&
        app.remaining().front().rfind("-", 0) != 0) {
      std::string known;
      for (const CLI::App* sub : app.get_subcommands({}))
        known += (known.empty() ? "" : ", ") + sub->get_name();
      std::fprintf(stderr, "zaya: error: unknown subcommand '%s' (the subcommands are: %s)\n",
                   app.remaining().front().c_str(), known.c_str());
      return 106;
    }
    return app.exit(e);
  }
  return std::nullopt;
}

// Runs the chosen command; an error ends every rank of the job.
int run(const std::vector<zaya::cli::Runner>& runners, zaya::dist::DistContext& dist) {
  try {
    for (const auto& runner : runners) {
      const int rc = runner();
      if (rc != zaya::cli::kNotMine) return rc;
    }
  } catch (const zaya::Error& e) {
    std::fprintf(stderr, "%szaya: error: %s\n", zaya::dist::rank_tag().c_str(), e.what());
    dist.abort_job(1);
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "%szaya: error: out of memory (a buffer could not be allocated); a smaller "
                 "micro-batch, sequence or model, or fewer ranks per machine, needs less\n",
                 zaya::dist::rank_tag().c_str());
    dist.abort_job(1);
    return 1;
  } catch (const std::length_error&) {
    std::fprintf(stderr,
                 "%szaya: error: a buffer larger than this machine can address was asked for; a "
                 "size given on the command line or in a file is far too large\n",
                 zaya::dist::rank_tag().c_str());
    dist.abort_job(1);
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the checks before did not foresee (a disk that filled, permissions that changed):
    // the operation, the reason and the path, without the library's "filesystem error:" prefix.
    std::string what = e.what();
    if (what.rfind("filesystem error: ", 0) == 0) what.erase(0, 18);
    std::fprintf(stderr, "%szaya: error: %s\n", zaya::dist::rank_tag().c_str(), what.c_str());
    dist.abort_job(1);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%szaya: unexpected error: %s\n", zaya::dist::rank_tag().c_str(),
                 e.what());
    dist.abort_job(1);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The BLAS kernels first: choosing them may restart the process, which must happen before MPI
  // starts (backend/blas_report.h, backend/cpu/blas_startup.h).
  try {
    zaya::prepare_blas(argc, argv);
  } catch (const zaya::Error& e) {
    std::fprintf(stderr, "%szaya: error: %s\n", zaya::dist::rank_tag().c_str(), e.what());
    return 1;
  }
  // MPI_Init under mpirun/srun (before parsing: it may edit argv); rank 0 alone prints.
  zaya::dist::DistContext dist(&argc, &argv);
  CLI::App app{"zaya: pretraining ZAYA1-style Mixture-of-Experts language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "zaya 0.1.0");
  int threads = 0;
  app.add_option("--threads", threads,
                 "CPU threads (default: all cores, split between the ranks of one machine; zaya "
                 "train lowers it while other work holds the CPU, see --fixed-threads)")
      ->check(zaya::cli::IntIn(0, 4096));
  std::string blas_kernels = "auto";  // read by prepare_blas before parsing; here for --help
  app.add_option("--blas-kernels", blas_kernels, zaya::blas_kernels_flag_help())
      ->capture_default_str();
  std::string vector_path = "auto";
  app.add_option("--vector-path", vector_path, zaya::kVectorPathFlagHelp)->capture_default_str();
  const std::vector<zaya::cli::Runner> runners = add_commands(app);
  // Every rank learns whether the command line ended on any rank (a parse error, --help): a rank
  // whose parse differs (a file that exists on one machine only) must not leave the others
  // waiting in a collective it never joins, nor wait itself in MPI_Finalize for them.
  const std::optional<int> rc = parse(app, argc, argv);
  const int ended = dist.agree_max(rc ? *rc + 1 : 0);
  if (rc) return *rc;
  if (ended > 0) {
    std::fprintf(stderr,
                 "%szaya: error: the command line ended on another rank (its message says "
                 "why); every rank ends\n",
                 zaya::dist::rank_tag().c_str());
    return ended > 1 ? ended - 1 : 1;
  }
  set_threads(threads > 0 ? threads : zaya::dist::threads_per_local_rank());
  try {
    choose_process_vector_path(app, vector_path);
  } catch (const zaya::Error& e) {
    std::fprintf(stderr, "%szaya: error: %s\n", zaya::dist::rank_tag().c_str(), e.what());
    dist.abort_job(1);
    return 1;
  }
  return run(runners, dist);
}
