// Process-level distributed state: which launcher started us, MPI_Init/MPI_Finalize, and the
// "[rank R/N]" tag that error messages carry so that every rank's failure names its rank.
#pragma once

#include <string>

namespace zaya::dist {

// Rank and world size as the launcher put them in the environment: Open MPI (OMPI_COMM_WORLD_*),
// PMIx (PMIX_RANK), PMI (PMI_RANK/PMI_SIZE), Slurm's srun (SLURM_PROCID/SLURM_NTASKS).
struct LaunchInfo {
  bool launched = false;  // one of the variables above is set
  int rank = 0;
  int world_size = 1;
  std::string source;  // "openmpi", "pmix", "pmi", "slurm", or "" when not launched
};
LaunchInfo detect_launch();

// Created once in main(). Under a launcher (and with MPI in the build) it initialises MPI and
// finalises it on destruction. With quiet_other_ranks, ranks other than 0 send stdout to
// /dev/null so that one rank prints; stderr stays, so every rank's errors reach the user.
class DistContext {
 public:
  DistContext(int* argc, char*** argv, bool quiet_other_ranks = true);
  ~DistContext();
  DistContext(const DistContext&) = delete;
  DistContext& operator=(const DistContext&) = delete;

  int rank() const;
  int world_size() const;
  bool mpi() const { return mpi_; }
  // After printing an error: with several ranks, the others may be blocked in a collective that
  // this rank will never join, so abort the whole job (MPI_Abort) instead of hanging.
  void abort_job(int code);
  // The largest of every rank's `value` (each rank must call it, at the same point); `value`
  // itself with one rank. main() compares the ranks' parse results with it.
  int agree_max(int value);

 private:
  bool mpi_ = false;
};

// The ranks on this machine, as the launcher put it in the environment
// (OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE); 1 when none is set.
int local_ranks();

// Several ranks on one machine would each start one OpenMP thread per core. The threads each
// rank should use so that the ranks of this node share its cores (cores / local ranks), or 0
// when the user chose (OMP_NUM_THREADS is set) or only one rank runs here.
int threads_per_local_rank();

// This process's index among the ranks on its machine, as the launcher put it in the environment
// (OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, Slurm's SLURM_LOCALID); 0 when none is
// set. --device cuda gives each local rank its own GPU by it.
int local_rank();

// True once a DistContext initialised MPI in this process.
bool mpi_active();
// "[rank R/N] " when the job has more than one rank, else "".
std::string rank_tag();

}  // namespace zaya::dist
