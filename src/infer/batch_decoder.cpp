#include "infer/batch_decoder.h"

#include <algorithm>

#include "backend/rope_tables.h"
#include "core/error.h"
#include "model/decode_step.h"

namespace zaya {

namespace {

KvShard shard_of(dist::Communicator* comm) {
  return comm ? KvShard{comm->rank(), comm->world_size()} : KvShard{};
}

int64_t capacity_of(const ZayaModel& model, const DecoderLimits& l) {
  const int64_t cap = l.capacity > 0 ? l.capacity : model.config().max_seq_len;
  ZAYA_CHECK(cap <= model.config().max_seq_len, "decoder: capacity ", cap,
             " exceeds the model's max_seq_len ", model.config().max_seq_len);
  ZAYA_CHECK(l.max_sequences >= 1, "decoder: max_sequences must be >= 1, got ", l.max_sequences);
  ZAYA_CHECK(l.block_size >= 1, "decoder: block_size must be >= 1, got ", l.block_size);
  return cap;
}

int64_t pool_blocks(const ZayaModel& model, const DecoderLimits& l, dist::Communicator* comm) {
  if (l.cache_blocks > 0) return l.cache_blocks;
  return int64_t(l.max_sequences) *
         shard_of(comm).local_blocks(capacity_of(model, l), l.block_size);
}

}  // namespace

BatchDecoder::BatchDecoder(ZayaModel& model, const DecoderLimits& limits, dist::Communicator* comm)
    : model_(model),
      be_(model.backend()),
      comm_(comm),
      shard_(shard_of(comm)),
      capacity_(capacity_of(model, limits)),
      pool_(model.backend(), int(model.config().num_attention_stages()),
            int(model.config().kv_dim()), limits.block_size, pool_blocks(model, limits, comm)),
      seqs_(size_t(limits.max_sequences)) {
  ZAYA_CHECK(!model.placement().bf16_weight_storage(),
             "decoding reads fp32 weights, and this model keeps its weights in bf16 alone "
             "(--weight-storage bf16)");
  const ModelConfig& c = model_.config();
  const size_t slots = seqs_.size(), stages = size_t(c.num_attention_stages());
  windows_ = BackendBuffer(be_, sizeof(float) * stages * slots * size_t(cca_window_floats(c)));
  v_prevs_ = BackendBuffer(be_, sizeof(float) * stages * slots * size_t(cca_v_prev_floats(c)));
  const int half = int(c.rotary_dim()) / 2;
  std::vector<float> cos_t(size_t(capacity_) * half), sin_t(size_t(capacity_) * half);
  rope_tables(cos_t.data(), sin_t.data(), int(capacity_), int(c.rotary_dim()), float(c.rope_theta));
  rope_cos_ = BackendBuffer(be_, sizeof(float) * cos_t.size());
  rope_sin_ = BackendBuffer(be_, sizeof(float) * sin_t.size());
  be_.to_device(rope_cos_.get(), cos_t.data(), rope_cos_.bytes());
  be_.to_device(rope_sin_.get(), sin_t.data(), rope_sin_.bytes());
  if (!be_.host_memory()) {
    arena_memory_ = std::make_unique<BackendArenaMemory>(be_);
    arena_.set_memory(arena_memory_.get());
  }
}

CcaDecodeState BatchDecoder::conv_state(int a) const {
  const ModelConfig& c = model_.config();
  const size_t slots = seqs_.size();
  return CcaDecodeState{windows_.floats() + size_t(a) * slots * size_t(cca_window_floats(c)),
                        v_prevs_.floats() + size_t(a) * slots * size_t(cca_v_prev_floats(c))};
}

const std::vector<std::vector<int32_t>>& BatchDecoder::last_routes() const {
  host_routes_.assign(last_routes_.size(), std::vector<int32_t>(size_t(last_n_)));
  for (size_t i = 0; i < last_routes_.size(); ++i)
    be_.to_host(host_routes_[i].data(), last_routes_[i], sizeof(int32_t) * size_t(last_n_));
  return host_routes_;
}

int64_t BatchDecoder::cache_bytes_per_token(const ModelConfig& c) {
  return c.num_attention_stages() * cca_kv_bytes_per_token(c);
}

int64_t BatchDecoder::mha_cache_bytes_per_token(const ModelConfig& c) {
  return c.num_attention_stages() * 2 * c.hidden_size * 4;
}

int64_t BatchDecoder::gqa_cache_bytes_per_token(const ModelConfig& c) {
  // Standard GQA over the hidden size with CCA's grouping: E/d query heads, E/d·n_k/n_q kv heads.
  return c.num_attention_stages() * 2 * c.hidden_size * c.num_kv_heads / c.num_q_heads * 4;
}

int64_t BatchDecoder::cache_bytes_allocated() const {
  const ModelConfig& c = model_.config();
  const int64_t conv = 2 * c.conv_channels() + c.kv_dim() / 2;
  return pool_.bytes() + int64_t(seqs_.size()) * c.num_attention_stages() * conv * 4;
}

int64_t BatchDecoder::least_memory_bytes(const ModelConfig& c, const DecoderLimits& l) {
  const int64_t capacity = l.capacity > 0 ? l.capacity : c.max_seq_len;
  const int64_t blocks = l.cache_blocks > 0 ? l.cache_blocks
                                            : int64_t(l.max_sequences) *
                                                  ((capacity + l.block_size - 1) / l.block_size);
  const int64_t conv = 2 * c.conv_channels() + c.kv_dim() / 2;
  const int64_t per_slot = c.num_attention_stages() * conv * 4 + 3 * c.vocab_size * 4;
  return blocks * l.block_size * cache_bytes_per_token(c) + int64_t(l.max_sequences) * per_slot;
}

BatchDecoder::Sequence& BatchDecoder::seq(int id) {
  ZAYA_CHECK(id >= 0 && id < int(seqs_.size()) && seqs_[size_t(id)].active, "decoder: sequence ",
             id, " is not in the decoder");
  return seqs_[size_t(id)];
}

const BatchDecoder::Sequence& BatchDecoder::seq(int id) const {
  return const_cast<BatchDecoder*>(this)->seq(id);
}

int BatchDecoder::active() const {
  return int(std::count_if(seqs_.begin(), seqs_.end(), [](const Sequence& s) { return s.active; }));
}

std::span<const float> BatchDecoder::logits(int id) const {
  return seq(id).logits;
}
int64_t BatchDecoder::length(int id) const {
  return seq(id).length;
}

bool BatchDecoder::can_add(int64_t positions) const {
  if (positions < 1 || positions > capacity_) return false;
  if (active() == int(seqs_.size())) return false;
  return shard_.local_blocks(positions, pool_.block_size()) <= pool_.free_blocks();
}

int BatchDecoder::take_slot(int64_t length, int64_t reserve) {
  const auto slot = std::find_if(seqs_.begin(), seqs_.end(), [](auto& s) { return !s.active; });
  ZAYA_CHECK(slot != seqs_.end(), "decoder: all ", seqs_.size(), " sequence slots are taken");
  const int64_t need = shard_.local_blocks(reserve, pool_.block_size());
  ZAYA_CHECK(need <= pool_.free_blocks(), "decoder: the cache has ", pool_.free_blocks(),
             " free blocks of ", pool_.block_size(), " positions; this sequence needs ", need);
  slot->blocks = pool_.allocate(need);
  slot->active = true;
  slot->length = length;
  slot->reserve = reserve;
  return int(slot - seqs_.begin());
}

int BatchDecoder::add(std::span<const int32_t> prompt, int64_t reserve) {
  const ModelConfig& c = model_.config();
  const int S = int(prompt.size()), V = int(c.vocab_size);
  if (reserve == 0) reserve = capacity_;
  ZAYA_CHECK(S >= 1 && S <= capacity_, "prefill: the prompt has ", S,
             " tokens; the decoder holds 1 to ", capacity_);
  ZAYA_CHECK(reserve >= S && reserve <= capacity_, "prefill: reserve ", reserve,
             " positions must lie between the prompt's ", S, " and the capacity ", capacity_);
  for (const int32_t t : prompt)
    ZAYA_CHECK(t >= 0 && t < V, "prefill: token id ", t, " is outside the vocabulary [0, ", V, ")");
  const int id = take_slot(S, reserve);
  Sequence& s = seqs_[size_t(id)];

  // One forward over the prompt; each attention stage's keys and values go to the blocks of the
  // positions this rank holds (a run of positions per block), and its convolution state is the
  // prompt's last positions.
  ZAYA_CHECK(model_.context_group() == nullptr,
             "decoding needs whole sequences: the model is set to a context group");
  ZAYA_CHECK(&model_.backend() == &be_,
             "decoder: the model's backend changed since the decoder was made");
  const int Dk = int(c.kv_dim()), bs = pool_.block_size();
  model_.prefill(prompt, [&](int a, const CcaActivations& act) {
    cca_state_from_forward(be_, conv_state(a), id, act, c, S);
    for (int64_t t = 0; t < S;) {
      const int64_t run = std::min<int64_t>(bs - t % bs, S - t);
      if (shard_.holds(t, bs)) {
        const int32_t block = s.blocks[shard_.local_index(t, bs)];
        const size_t at = size_t(t % bs) * Dk, bytes = sizeof(float) * size_t(run) * Dk;
        be_.copy(pool_.keys(block, a) + at, act.k + size_t(t) * Dk, bytes);
        be_.copy(pool_.values(block, a) + at, act.v + size_t(t) * Dk, bytes);
      }
      t += run;
    }
  });
  const std::span<const float> all = model_.logits();
  s.logits.assign(all.begin() + ptrdiff_t(S - 1) * V, all.begin() + ptrdiff_t(S) * V);
  return id;
}

int BatchDecoder::fork(int id, int64_t reserve) {
  if (reserve == 0) reserve = capacity_;
  const Sequence& from = seq(id);
  ZAYA_CHECK(reserve >= from.length && reserve <= capacity_, "fork: reserve ", reserve,
             " positions must lie between the sequence's ", from.length, " and the capacity ",
             capacity_);
  const int new_id = take_slot(from.length, reserve);
  Sequence& s = seqs_[size_t(new_id)];
  s.logits = from.logits;
  const ModelConfig& c = model_.config();
  for (int a = 0; a < int(c.num_attention_stages()); ++a) {
    const CcaDecodeState st = conv_state(a);
    const size_t wf = size_t(cca_window_floats(c)), vf = size_t(cca_v_prev_floats(c));
    be_.copy(st.window + size_t(new_id) * wf, st.window + size_t(id) * wf, sizeof(float) * wf);
    be_.copy(st.v_prev + size_t(new_id) * vf, st.v_prev + size_t(id) * vf, sizeof(float) * vf);
  }
  // Whole blocks are copied: positions past the length are never read before they are written.
  const int64_t used = shard_.local_blocks(from.length, pool_.block_size());
  const size_t block_floats = size_t(pool_.block_size()) * size_t(model_.config().kv_dim());
  for (int64_t j = 0; j < used; ++j)
    for (int a = 0; a < int(model_.config().num_attention_stages()); ++a) {
      const int32_t src = from.blocks[size_t(j)], dst = s.blocks[size_t(j)];
      be_.copy(pool_.keys(dst, a), pool_.keys(src, a), sizeof(float) * block_floats);
      be_.copy(pool_.values(dst, a), pool_.values(src, a), sizeof(float) * block_floats);
    }
  return new_id;
}

void BatchDecoder::remove(int id) {
  Sequence& s = seq(id);
  pool_.release(s.blocks);
  s = Sequence{};
}

struct BatchDecoder::StepTables {
  const int32_t *tokens, *positions, *slots, *blocks, *counts;  // [n] each; [n, max_blocks]
  const int64_t* kv_rows;                                       // [n, 2]
  int max_blocks;
};

// The decoder's side of a decode step (model/decode_step.h): its convolution states and cache
// blocks, and the attention over them, this rank's partials merged across the ranks.
class BatchDecoder::StepCache final : public DecodeCache {
 public:
  StepCache(BatchDecoder& d, const StepTables& t, int n) : d_(d), t_(t) {
    const ModelConfig& c = d.model_.config();
    const int nq = int(c.num_q_heads), Dq = int(c.num_q_heads * c.head_dim), hd = int(c.head_dim);
    partials_ = AttentionPartials{d.arena_.floats(size_t(n) * nq), d.arena_.floats(size_t(n) * nq),
                                  d.arena_.floats(size_t(n) * Dq)};
    scores_ = d.arena_.floats(size_t(n) * nq * t.max_blocks * d.pool_.block_size());
    if (d.shard_.world > 1) gathered_ = d.arena_.floats(size_t(d.shard_.world) * n * nq * (hd + 2));
  }
  CcaDecodeState conv_state(int a) const override { return d_.conv_state(a); }
  float* kv_rows_base(int a) const override { return d_.pool_.keys(0, a); }
  void attend(int a, float* att, const float* q, int n) override {
    const ModelConfig& c = d_.model_.config();
    PagedKv kv = d_.pool_.paged(a);
    kv.blocks = t_.blocks;
    kv.counts = t_.counts;
    kv.max_blocks = t_.max_blocks;
    kv_attention_partials(d_.be_, partials_, scores_, q, kv, n, c);
    combine_attention_partials(d_.be_, att, partials_, n, c, d_.comm_, gathered_);
  }

 private:
  BatchDecoder& d_;
  const StepTables& t_;
  AttentionPartials partials_{};
  float* scores_ = nullptr;
  float* gathered_ = nullptr;
};

BatchDecoder::StepTables BatchDecoder::upload_tables(const std::vector<Sequence*>& rows,
                                                     std::span<const int> ids,
                                                     std::span<const int32_t> tokens) {
  const int n = int(rows.size()), bs = pool_.block_size();
  int mb = 1;
  for (const Sequence* s : rows) mb = std::max(mb, int(s->blocks.size()));
  // [tokens | positions | slots | blocks | counts], and the cache rows of the new positions.
  std::vector<int32_t> ints(size_t(n) * (3 + 2 * size_t(mb)));
  std::vector<int64_t> kv_rows(size_t(2) * n, -1);
  int32_t* blocks = ints.data() + 3 * size_t(n);
  int32_t* counts = blocks + size_t(n) * mb;
  for (int r = 0; r < n; ++r) {
    const Sequence& s = *rows[size_t(r)];
    const int64_t t = s.length;
    ints[size_t(r)] = tokens[size_t(r)];
    ints[size_t(n + r)] = int32_t(t);
    ints[size_t(2 * n + r)] = ids[size_t(r)];
    kv_block_table(blocks + size_t(r) * mb, counts + size_t(r) * mb, mb, s.blocks, t + 1, shard_,
                   bs);
    if (shard_.holds(t, bs)) {
      const int64_t key = pool_.key_row(s.blocks[shard_.local_index(t, bs)], int(t % bs));
      kv_rows[size_t(2 * r)] = key;
      kv_rows[size_t(2 * r + 1)] = key + bs;
    }
  }
  int32_t* dev_ints = arena_.ints(ints.size());
  auto* dev_rows = static_cast<int64_t*>(arena_.bytes(sizeof(int64_t) * kv_rows.size()));
  be_.to_device(dev_ints, ints.data(), sizeof(int32_t) * ints.size());
  be_.to_device(dev_rows, kv_rows.data(), sizeof(int64_t) * kv_rows.size());
  return StepTables{dev_ints,
                    dev_ints + n,
                    dev_ints + 2 * size_t(n),
                    dev_ints + 3 * size_t(n),
                    dev_ints + (3 + size_t(mb)) * size_t(n),
                    dev_rows,
                    mb};
}

void BatchDecoder::step(std::span<const int> ids, std::span<const int32_t> tokens) {
  const ModelConfig& c = model_.config();
  const int V = int(c.vocab_size);
  const int n = int(ids.size());
  ZAYA_CHECK(tokens.size() == ids.size(), "decode: ", ids.size(), " sequences but ", tokens.size(),
             " tokens");
  ZAYA_CHECK(&model_.backend() == &be_,
             "decoder: the model's backend changed since the decoder was made");
  if (n == 0) return;
  std::vector<Sequence*> rows(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    Sequence& s = seq(ids[size_t(r)]);
    for (int q = 0; q < r; ++q)
      ZAYA_CHECK(rows[size_t(q)] != &s, "decode: sequence ", ids[size_t(r)], " appears twice");
    ZAYA_CHECK(tokens[size_t(r)] >= 0 && tokens[size_t(r)] < V, "decode: token id ",
               tokens[size_t(r)], " is outside the vocabulary [0, ", V, ")");
    ZAYA_CHECK(s.length < s.reserve, "decode: sequence ", ids[size_t(r)], " is full (", s.reserve,
               " positions reserved)");
    rows[size_t(r)] = &s;
  }
  arena_.reset();
  const StepTables tables = upload_tables(rows, ids, tokens);
  StepCache cache(*this, tables, n);
  const DecodeRows decode_rows{n,
                               tables.tokens,
                               tables.positions,
                               tables.slots,
                               tables.kv_rows,
                               rope_cos_.floats(),
                               rope_sin_.floats()};
  last_routes_.clear();
  last_n_ = n;
  const float* logits = decode_step(model_, decode_rows, cache, arena_, &last_routes_);
  // The one read back: the rows' logits, for sampling.
  std::vector<float> host(size_t(n) * V);
  be_.to_host(host.data(), logits, sizeof(float) * host.size());
  for (int r = 0; r < n; ++r) {
    Sequence& s = *rows[size_t(r)];
    std::copy_n(host.data() + size_t(r) * V, V, s.logits.begin());
    ++s.length;
  }
}

}  // namespace zaya
