// The data × context rank grid of a job (docs/long-context.md): rank r is context rank r mod C
// of data rank r / C, so the ranks of one sequence are neighbours (one node when the launcher
// fills nodes in order). Used by zaya train and zaya eval.
#pragma once

#include <memory>
#include <string>

#include "dist/communicator.h"

namespace zaya::dist {

struct RankGrid {
  int context = 1;                             // C: ranks per sequence
  int data = 1;                                // world / C
  int data_rank = 0;                           // this rank's data-parallel index
  std::unique_ptr<Communicator> context_comm;  // null when C == 1 (whole sequences)
  std::unique_ptr<Communicator> data_comm;     // null when C == 1 (the world is the data group)
};

// Collective when context > 1 (two communicator splits). Throws when context does not divide the
// world: "WHERE: context parallel C (SET_BY) must divide the N ranks of this job", SET_BY naming
// the flag or field that set it.
RankGrid make_rank_grid(Communicator& world, int context, const std::string& where,
                        const std::string& set_by);

}  // namespace zaya::dist
