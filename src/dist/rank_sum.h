// Small host-side reductions on top of Communicator::all_gather, for values the Communicator's
// typed collectives do not carry (fp64 sums, int64 counts): every rank gathers every rank's
// values and adds them in rank order 0..N-1, so the result is bitwise the same on every rank and
// in every run. Meant for a handful of scalars per step (losses, norms, route counts).
#pragma once

#include <cstdint>
#include <span>

#include "dist/communicator.h"

namespace zaya::dist {

// values[i] ← Σ_r values_r[i], summed in rank order. comm == nullptr means one process.
void sum_over_ranks(Communicator* comm, std::span<double> values);
void sum_over_ranks(Communicator* comm, std::span<int64_t> values);

}  // namespace zaya::dist
