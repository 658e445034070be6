// BatchDecoder: many sequences of a ZayaModel decoded together. Each joins with a prompt that is
// prefilled in one forward, then every step() appends one token to each of any subset of the
// sequences (ragged lengths: each at its own position) and gives each its next-token logits;
// sequences leave between steps and their cache blocks serve the next (continuous batching).
//
// The decode state is the CCA stages' alone (model/cca_decode.h): keys and values in the blocks of
// one preallocated KvBlockPool, and a constant-size convolution/value-shift state per slot. MoE
// stages, residual merges and norms keep nothing between tokens. Everything computes on the
// model's backend (backend/backend.h) and the state lives in its memory; the host reads back the
// logits (and the experts' row counts at each MoE stage).
//
// A sequence's logits do not depend on which other sequences share its steps, bit for bit, on
// every backend: every product of a step is row-independent (Backend::rows_matmul_forward) and the
// attention of a row reads only its own sequence. So a request served in a batch of 16 decodes
// exactly as it does alone.
//
// With a communicator of several ranks, every sequence's cache is sharded over them (tree
// attention, infer/kv_attention.h): each rank keeps 1/world of the positions, the rest of the
// model runs on every rank, and the ranks must call add/step/remove identically (SPMD).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/arena.h"
#include "dist/communicator.h"
#include "infer/kv_attention.h"
#include "infer/kv_blocks.h"
#include "model/cca_decode.h"
#include "model/zaya_model.h"

namespace zaya {

struct DecoderLimits {
  int max_sequences = 1;     // sequences in the decoder at once
  int64_t capacity = 0;      // positions per sequence (prompt + generated); 0: max_seq_len
  int block_size = 16;       // positions per cache block
  int64_t cache_blocks = 0;  // blocks in the pool (this rank's); 0: max_sequences full sequences
};

class BatchDecoder {
 public:
  // The model must outlive the decoder and keep its weights; prefills overwrite its forward()
  // activations, and keep its backend. `comm` (optional, may be nullptr) shards the caches over its
  // ranks (host-memory backends only).
  BatchDecoder(ZayaModel& model, const DecoderLimits& limits, dist::Communicator* comm = nullptr);

  // Whether a sequence that may reach `positions` positions can join now (a free slot and the
  // cache blocks it would reserve). Every rank answers the same.
  bool can_add(int64_t positions) const;
  // Prefills `prompt` (1..capacity tokens) as a new sequence that may grow to `reserve` positions
  // (0: capacity), reserving its cache blocks; returns its id. logits(id) is the next token's.
  int add(std::span<const int32_t> prompt, int64_t reserve = 0);
  // Appends tokens[i] to sequence ids[i] (distinct ids, each below its reserve) in one batched
  // step; afterwards logits(ids[i]) is the token after it.
  void step(std::span<const int> ids, std::span<const int32_t> tokens);
  // A new sequence that continues where `id` stands (same cache, state and logits) and may grow to
  // `reserve` positions (0: capacity); returns its id. Scoring several continuations of one context
  // computes the context once (zaya eval --tasks).
  int fork(int id, int64_t reserve = 0);
  // Leaves: the slot and the blocks become free.
  void remove(int id);

  std::span<const float> logits(int id) const;
  // The logits [S, V] of every position of the prompt of the last add(), until the next add().
  std::span<const float> prefill_logits() const { return model_.logits(); }
  int64_t length(int id) const;
  int64_t capacity() const { return capacity_; }
  int max_sequences() const { return int(seqs_.size()); }
  int active() const;
  // Routes chosen at every MoE stage in the last step (row i: ids[i]), [stages/2][n]: for tests
  // (read back from the backend on each call; valid until the next call or step).
  const std::vector<std::vector<int32_t>>& last_routes() const;

  // Cache bytes: per position of context (CCA's compressed keys and values over the attention
  // stages), what standard attention of the same model would keep (multi-head over the hidden
  // size, and grouped-query with CCA's q:kv head ratio over the hidden size), and what this rank
  // holds (the pool plus the constant states of its slots).
  static int64_t cache_bytes_per_token(const ModelConfig& c);
  static int64_t mha_cache_bytes_per_token(const ModelConfig& c);
  static int64_t gqa_cache_bytes_per_token(const ModelConfig& c);
  int64_t cache_bytes_allocated() const;
  // The least memory a decoder of `limits` takes on one rank before its first step: its cache
  // blocks and every slot's constant states, and three rows of logits per sequence (its own, the
  // step's and the host's copy). Enough to refuse a batch that cannot fit (the eval.batch of a
  // run, checked before step 1); the prefill's and the step's activations come on top.
  static int64_t least_memory_bytes(const ModelConfig& c, const DecoderLimits& limits);
  const KvBlockPool& pool() const { return pool_; }

 private:
  struct Sequence {
    bool active = false;
    int64_t length = 0, reserve = 0;
    std::vector<int32_t> blocks;  // this rank's local blocks, in position order
    std::vector<float> logits;    // [V]
  };
  Sequence& seq(int id);
  const Sequence& seq(int id) const;
  // A free slot, made active with `length` positions and the blocks of `reserve`; its id.
  int take_slot(int64_t length, int64_t reserve);

  // Attention stage a's convolution states (one row per slot).
  CcaDecodeState conv_state(int a) const;
  // The decode rows' host-side tables, uploaded once per step (step()).
  struct StepTables;
  StepTables upload_tables(const std::vector<Sequence*>& rows, std::span<const int> ids,
                           std::span<const int32_t> tokens);
  // The decoder's side of a step (model/decode_step.h's DecodeCache).
  class StepCache;

  ZayaModel& model_;
  const Backend& be_;  // the model's, at construction
  dist::Communicator* comm_;
  KvShard shard_;
  int64_t capacity_;
  KvBlockPool pool_;
  std::vector<Sequence> seqs_;
  BackendBuffer windows_, v_prevs_;          // [attention stages, slots, ...] (model/cca_decode.h)
  BackendBuffer rope_cos_, rope_sin_;        // [capacity, rot/2]
  std::vector<const int32_t*> last_routes_;  // per MoE stage, the last step's (the arena's)
  int last_n_ = 0;
  mutable std::vector<std::vector<int32_t>> host_routes_;  // last_routes()'s copy
  std::unique_ptr<ArenaMemory> arena_memory_;  // the backend's memory, unless it is the host's
  Arena arena_;
};

}  // namespace zaya
