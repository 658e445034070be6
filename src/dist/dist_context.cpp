#include "dist/dist_context.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"
#ifdef ZAYA_HAVE_MPI
#include "dist/mpi_communicator.h"
#endif

namespace zaya::dist {

namespace {

bool g_mpi_active = false;
int g_rank = 0;
int g_world = 1;

// An integer launcher variable, or -1 when unset. A malformed value is the launcher's bug, but
// guessing would put two processes on the same rank, so it fails loudly.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  ZAYA_CHECK(end && *end == '\0' && x >= 0, "environment variable ", name, "='", v,
             "' is not a non-negative integer (set by the launcher: mpirun, srun or PMI)");
  return int(x);
}

}  // namespace

LaunchInfo detect_launch() {
  struct Source {
    const char* name;
    const char* rank_var;
    const char* size_var;
  };
  // Most specific first: mpirun under Slurm sets both, and Open MPI's own variables win.
  static const Source kSources[] = {
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"pmix", "PMIX_RANK", "PMIX_SIZE"},
      {"pmi", "PMI_RANK", "PMI_SIZE"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS"},
  };
  LaunchInfo info;
  for (const auto& s : kSources) {
    const int rank = env_int(s.rank_var);
    if (rank < 0) continue;
    const int size = env_int(s.size_var);
    info.launched = true;
    info.rank = rank;
    // PMIx does not always export a size; MPI_Comm_size supplies it after MPI_Init.
    info.world_size = size > 0 ? size : 1;
    info.source = s.name;
    ZAYA_CHECK(info.rank < info.world_size || size <= 0, s.rank_var, "=", rank, " is not below ",
               s.size_var, "=", size);
    return info;
  }
  return info;
}

DistContext::DistContext(int* argc, char*** argv, bool quiet_other_ranks) {
  const LaunchInfo launch = detect_launch();
  g_rank = launch.rank;
  g_world = launch.world_size;
#ifdef ZAYA_HAVE_MPI
  if (launch.launched) {
    mpi_init(argc, argv);
    mpi_ = g_mpi_active = true;
    g_rank = mpi_world_rank();
    g_world = mpi_world_size();
  }
#else
  (void)argc;
  (void)argv;
#endif
  if (quiet_other_ranks && g_rank != 0) {
    if (!std::freopen("/dev/null", "w", stdout)) std::perror("zaya: silencing stdout");
  }
}

DistContext::~DistContext() {
#ifdef ZAYA_HAVE_MPI
  if (mpi_) {
    mpi_finalize();
    g_mpi_active = false;
  }
#endif
}

int DistContext::rank() const {
  return g_rank;
}
int DistContext::world_size() const {
  return g_world;
}

int DistContext::agree_max(int value) {
#ifdef ZAYA_HAVE_MPI
  if (mpi_ && g_world > 1) return mpi_world_max(value);
#endif
  return value;
}

void DistContext::abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef ZAYA_HAVE_MPI
  if (mpi_ && g_world > 1) {
    // MPI_Abort kills the other ranks at once; a short grace lets a rank that failed at the same
    // moment (a bad flag fails on all of them) print its own error first.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    mpi_abort(code);
  }
#endif
  (void)code;
}

bool mpi_active() {
  return g_mpi_active;
}

std::string rank_tag() {
  if (g_world <= 1) return "";
  return "[rank " + std::to_string(g_rank) + "/" + std::to_string(g_world) + "] ";
}

int local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* s = std::getenv(v)) {
      char* end = nullptr;
      const long r = std::strtol(s, &end, 10);
      if (end != s && *end == '\0' && r >= 0 && r < (1L << 20)) return int(r);
    }
  return 0;
}

int local_ranks() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (const char* s = std::getenv(v)) return std::max(1, std::atoi(s));
  return 1;
}

int threads_per_local_rank() {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return 0;
  const int local = local_ranks();
  if (local <= 1) return 0;
  return std::max(1, int(std::thread::hardware_concurrency()) / local);
}

}  // namespace zaya::dist
