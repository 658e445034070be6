// Who orthogonalises which Muon matrix under ZeRO-1. Newton–Schulz needs a whole matrix, but the
// ZeRO-1 ranges cut the flat buffer without regard for matrices, and whole matrices are not spread
// evenly over the ranges either (one rank may hold the embedding, another only Muon matrices).
// The plan, a pure function of the layout (so every rank computes the same one):
//  1. each matrix goes to the rank holding its largest piece (a matrix held whole stays home, and
//     a matrix cut by a range boundary moves only its smaller pieces: the ZAYA1 paper's neighbour
//     exchange);
//  2. while the Newton–Schulz work (∝ rows·cols·min(rows, cols)) of the busiest rank exceeds the
//     mean by more than 5 %, one of its matrices moves to the least busy rank (the one whose cost
//     is closest to half the gap, and only if it narrows the gap), so no rank waits on another.
// Each holder sends its piece of the momentum direction to the owner (4 bytes per element) and
// receives the orthogonalised piece back (4 bytes per element).
#pragma once

#include <cstdint>
#include <vector>

#include "model/params.h"
#include "optim/shard_layout.h"

namespace zaya {

struct MuonPlan {
  struct Matrix {
    size_t spec = 0;            // index into the specs
    int owner = 0;              // the rank that runs Newton–Schulz on it
    int64_t owned_offset = -1;  // where it sits in this rank's owned buffer (-1: not this rank's)
  };
  std::vector<Matrix> matrices;  // the Muon specs, in registry order
  int64_t owned_floats = 0;      // this rank's buffer of whole matrices to orthogonalise
  int64_t exchange_bytes = 0;    // this rank's bytes sent + received per step
  std::vector<double> work;  // Newton–Schulz cost per rank (rows·cols·min(rows, cols) summed)
};

MuonPlan plan_muon(const std::vector<ParamSpec>& specs, const ShardLayout& layout);

// Elements [begin, end) of the flat buffer that rank r holds of tensor p (begin == end: none).
struct FlatPiece {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
FlatPiece piece_of(const ParamSpec& p, const ShardLayout& layout, int rank);

}  // namespace zaya
