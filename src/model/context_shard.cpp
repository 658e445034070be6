#include "model/context_shard.h"

#include "core/error.h"

namespace zaya {

ContextShard::ContextShard(dist::Communicator* group, int S) : comm(group), seq_len(S) {
  ZAYA_CHECK(comm != nullptr, "context parallelism needs a context-group communicator");
  ZAYA_CHECK(S >= min_seq_len(size()), "context parallel ", size(), ": a sequence of ", S,
             " tokens is too short; ", size(), " ranks cut it into ", chunks(),
             " chunks of at least ", kMinChunk,
             " positions (CCA's convolutions read 2 positions back), so seq_len must be >= ",
             min_seq_len(size()));
}

int ContextShard::position(int t) const {
  return t < len(0) ? chunk_begin(chunk(0)) + t : chunk_begin(chunk(1)) + (t - len(0));
}

}  // namespace zaya
