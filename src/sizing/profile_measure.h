// `zaya size profile`: measures this machine's hardware profile (sizing/hardware_profile.h).
//
// One process measures the compute side at each thread count: the GEMM grid, STREAM triad, and
// forward + backward steps of four probe models whose non-GEMM time (the step minus its products
// priced on the just-measured curve) calibrates the two non-GEMM rates by least squares. Under an
// MPI launcher with N > 1 ranks it adds to an existing profile the collectives ZeRO-1 uses and
// the rates of a rank at cores / N threads measured while all N ranks run.
#pragma once

#include <cstdio>
#include <vector>

#include "dist/communicator.h"
#include "model/config.h"
#include "sizing/hardware_profile.h"

namespace zaya {

struct ProfileOptions {
  std::vector<int> threads;     // empty: 1 and every core (and their powers of two between)
  double gemm_min_time = 0.05;  // seconds per GEMM grid point (best of 3 batches)
  int probe_steps = 3;          // timed steps per probe model (median), after one warm-up step
  int grid_max = 4096;          // largest M, N, K of the GEMM grid (smaller: a quicker profile)
  int64_t membw_elements = 0;   // STREAM array length (0: its rule, 4 × the last-level cache)
};

// The probe models and their micro-batches, shared with the tests.
struct Probe {
  ModelConfig config;
  int batch = 0, seq = 0;
};
std::vector<Probe> profile_probes();

HardwareProfile measure_compute_profile(const ProfileOptions& opt, std::FILE* log);

// The rates of one rank at `threads` threads. With `comm` (N > 1 ranks on this machine), every
// rank measures at once and each phase starts together: the rates of a rank whose machine is
// shared with N − 1 others doing the same (ranks = N in the result; rank 0's figures).
ProfileRates measure_rates(int threads, const HardwareProfile& base, const ProfileOptions& opt,
                           std::FILE* log, dist::Communicator* comm);

// Collective rates of `comm` (every rank calls it): reduce-scatter and all-gather of one ZeRO-1
// bucket (2^20 floats per rank) for bandwidth, of 8 floats per rank for latency.
CommRates measure_comm_rates(dist::Communicator& comm, std::FILE* log);

// Least-squares non-negative fit of measured = a·x + b·y, each equation weighted by 1/measured
// (relative error); used for the two non-GEMM rates.
void fit_two_rates(const std::vector<double>& x, const std::vector<double>& y,
                   const std::vector<double>& measured, double& a, double& b);

// Resident memory of this process now (VmRSS), in bytes; -1 when /proc is not readable.
int64_t resident_bytes();

}  // namespace zaya
