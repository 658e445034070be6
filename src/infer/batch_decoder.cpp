#include "infer/batch_decoder.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/norm.h"
#include "backend/cpu/residual.h"
#include "backend/cpu/rowwise.h"
#include "backend/rope_tables.h"
#include "core/error.h"
#include "model/moe_decode.h"

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
      comm_(comm),
      shard_(shard_of(comm)),
      capacity_(capacity_of(model, limits)),
      pool_(int(model.config().num_attention_stages()), int(model.config().kv_dim()),
            limits.block_size, pool_blocks(model, limits, comm)),
      seqs_(size_t(limits.max_sequences)) {
  const ModelConfig& c = model_.config();
  const int half = int(c.rotary_dim()) / 2;
  rope_cos_.assign(size_t(capacity_) * half, 0.0f);
  rope_sin_.assign(size_t(capacity_) * half, 0.0f);
  rope_tables(rope_cos_.data(), rope_sin_.data(), int(capacity_), int(c.rotary_dim()),
              float(c.rope_theta));
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
  // positions this rank holds, and its convolution state is the prompt's last positions.
  ZAYA_CHECK(model_.context_group() == nullptr,
             "decoding needs whole sequences: the model is set to a context group");
  model_.forward(prompt, {}, 1, S);
  const int Dk = int(c.kv_dim()), bs = pool_.block_size();
  s.conv.resize(size_t(c.num_attention_stages()));
  for (int i = 0; i < int(c.num_stages); i += 2) {
    const int a = i / 2;
    const CcaActivations& act = model_.acts_[size_t(i)].cca;
    cca_conv_state_from_forward(s.conv[size_t(a)], act, c, 1, S, 0);
    for (int64_t t = 0; t < S; ++t) {
      if (!shard_.holds(t, bs)) continue;
      const int32_t block = s.blocks[shard_.local_index(t, bs)];
      std::memcpy(pool_.keys(block, a) + size_t(t % bs) * Dk, act.k + size_t(t) * Dk,
                  sizeof(float) * Dk);
      std::memcpy(pool_.values(block, a) + size_t(t % bs) * Dk, act.v + size_t(t) * Dk,
                  sizeof(float) * Dk);
    }
  }
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
  s.conv = from.conv;
  s.logits = from.logits;
  // Whole blocks are copied: positions past the length are never read before they are written.
  const int64_t used = shard_.local_blocks(from.length, pool_.block_size());
  const size_t block_floats = size_t(pool_.block_size()) * size_t(model_.config().kv_dim());
  for (int64_t j = 0; j < used; ++j)
    for (int a = 0; a < int(model_.config().num_attention_stages()); ++a) {
      const int32_t src = from.blocks[size_t(j)], dst = s.blocks[size_t(j)];
      std::memcpy(pool_.keys(dst, a), pool_.keys(src, a), sizeof(float) * block_floats);
      std::memcpy(pool_.values(dst, a), pool_.values(src, a), sizeof(float) * block_floats);
    }
  return new_id;
}

void BatchDecoder::remove(int id) {
  Sequence& s = seq(id);
  pool_.release(s.blocks);
  s = Sequence{};
}

void BatchDecoder::step(std::span<const int> ids, std::span<const int32_t> tokens) {
  const ModelConfig& c = model_.config();
  const int E = int(c.hidden_size), V = int(c.vocab_size), L = int(c.num_stages);
  const int R = int(c.router_dim), Dq = int(c.num_q_heads * c.head_dim), nq = int(c.num_q_heads);
  const int d = int(c.head_dim), Dk = int(c.kv_dim()), bs = pool_.block_size();
  const int half = int(c.rotary_dim()) / 2;
  const int n = int(ids.size());
  ZAYA_CHECK(tokens.size() == ids.size(), "decode: ", ids.size(), " sequences but ", tokens.size(),
             " tokens");
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
  const ParamRegistry& reg = model_.params().registry();
  const float* W = model_.params().weights();
  const float* emb_w = W + reg.get("model.embed_tokens.weight").offset;

  // h_{-1}: the embedding rows.
  float* h_prev = arena_.floats(size_t(n) * E);
  for (int r = 0; r < n; ++r)
    std::memcpy(h_prev + size_t(r) * E, emb_w + size_t(tokens[size_t(r)]) * E, sizeof(float) * E);
  const float* r_prev = nullptr;
  const float* router_state = nullptr;
  std::vector<KvRow> kv_rows(static_cast<size_t>(n));
  std::vector<CcaDecodeRow> cca_rows(static_cast<size_t>(n));
  float* q = arena_.floats(size_t(n) * Dq);
  float* att = arena_.floats(size_t(n) * Dq);
  AttentionPartials partials{arena_.floats(size_t(n) * nq), arena_.floats(size_t(n) * nq),
                             arena_.floats(size_t(n) * Dq)};
  float* gathered = arena_.floats(size_t(shard_.world) * n * nq * (d + 2));
  last_routes_.assign(size_t(c.num_stages / 2), std::vector<int32_t>(size_t(n)));
  model_.ensure_bound();
  for (int i = 0; i < L; ++i) {
    const ZayaModel::Stage& st = model_.stages_[size_t(i)];
    float* res = arena_.floats(size_t(n) * E);
    cpu::residual_merge_forward(res, h_prev, st.hb, st.hs, r_prev, st.rb, st.rs, n, E);
    float* x = arena_.floats(size_t(n) * E);
    cpu::rmsnorm_forward(x, nullptr, res, st.norm_w, n, E, float(c.norm_eps));
    float* h = arena_.floats(size_t(n) * E);
    if (ModelConfig::is_attention_stage(i)) {
      const int a = i / 2;
      for (int r = 0; r < n; ++r) {
        Sequence& s = *rows[size_t(r)];
        const int64_t t = s.length;
        CcaDecodeRow& cr = cca_rows[size_t(r)];
        cr.state = &s.conv[size_t(a)];
        cr.rope_cos = rope_cos_.data() + size_t(t) * half;
        cr.rope_sin = rope_sin_.data() + size_t(t) * half;
        cr.k_slot = cr.v_slot = nullptr;
        if (shard_.holds(t, bs)) {
          const int32_t block = s.blocks[shard_.local_index(t, bs)];
          cr.k_slot = pool_.keys(block, a) + size_t(t % bs) * Dk;
          cr.v_slot = pool_.values(block, a) + size_t(t % bs) * Dk;
        }
        kv_rows[size_t(r)] = KvRow{s.blocks, t + 1};
      }
      cca_decode_project(q, cca_rows.data(), x, n, st.cca, c, arena_);
      kv_attention_partials(partials, q, kv_rows, pool_, a, shard_, c, arena_);
      combine_attention_partials(att, partials, n, c, comm_, gathered);
      cca_decode_output(h, att, n, st.cca, c);
    } else {
      float* state = arena_.floats(size_t(n) * R);
      moe_decode(h, state, x, router_state, st.moe, c, n, arena_,
                 last_routes_[size_t(i / 2)].data());
      router_state = state;
    }
    h_prev = h;
    r_prev = res;
  }
  float* final_r = arena_.floats(size_t(n) * E);
  cpu::residual_merge_forward(final_r, h_prev,
                              W + reg.get("model.res_scale.hidden_states_bias").offset,
                              W + reg.get("model.res_scale.hidden_states_scale").offset, r_prev,
                              W + reg.get("model.res_scale.residual_bias").offset,
                              W + reg.get("model.res_scale.residual_scale").offset, n, E);
  float* y = arena_.floats(size_t(n) * E);
  cpu::rmsnorm_forward(y, nullptr, final_r, W + reg.get("model.final_norm.weight").offset, n, E,
                       float(c.norm_eps));
  float* logits = arena_.floats(size_t(n) * V);
  cpu::rows_matmul_forward(logits, y, emb_w, nullptr, n, E, V);
  for (int r = 0; r < n; ++r) {
    Sequence& s = *rows[size_t(r)];
    std::copy_n(logits + size_t(r) * V, V, s.logits.begin());
    ++s.length;
  }
}

}  // namespace zaya
