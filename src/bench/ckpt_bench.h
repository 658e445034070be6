// `zaya bench ckpt`: how long a checkpoint save takes when every rank writes its own file at the
// same time (zaya's ShardedCheckpoint scheme) against a single writer (rank 0 gathers every
// rank's ZeRO-1 range of weights and optimizer state, then writes all the files), for the model
// of a config, in the same run. Both produce the same checkpoint layout; only who writes differs.
#pragma once

#include <cstdio>
#include <string>

#include "dist/communicator.h"

namespace zaya {

struct CkptBenchOptions {
  std::string config_path;
  std::string dir = "runs/bench-ckpt";  // scratch checkpoints are written (and removed) here
  int repeats = 3;                      // the median of this many saves is reported
};

// Collective. Rank 0 prints one line per scheme and the ratio to `out`.
void run_ckpt_bench(dist::Communicator& comm, const CkptBenchOptions& opt, std::FILE* out);

}  // namespace zaya
