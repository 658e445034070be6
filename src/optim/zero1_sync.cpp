#include "optim/zero1_sync.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace zaya {

int64_t Zero1Sync::bucket_for(int64_t staging_floats, int world, int64_t chunk) {
  return std::max<int64_t>(1, std::min(staging_floats / std::max(world, 1), chunk));
}

Zero1Sync::Zero1Sync(dist::Communicator& comm, int64_t total_floats, int64_t staging_floats,
                     const Backend* memory, bool gather_only)
    : comm_(comm),
      be_(memory ? memory : &cpu_backend()),
      layout_{total_floats, comm.world_size(), comm.rank()},
      gather_only_(gather_only) {
  ZAYA_CHECK(staging_floats > 0, "Zero1Sync: the staging size must be > 0 floats, got ",
             staging_floats);
  bucket_ = bucket_for(staging_floats, layout_.world, layout_.chunk());
  for (int i = 0; i < (gather_only ? 1 : kInFlight); ++i) {
    slots_[i].staging = BackendBuffer(*be_, sizeof(float) * size_t(bucket_ * layout_.world));
    slots_[i].piece = BackendBuffer(*be_, sizeof(float) * size_t(bucket_));
  }
}

int64_t Zero1Sync::buffer_floats() const {
  int64_t n = 0;
  for (const Slot& s : slots_) n += int64_t((s.staging.bytes() + s.piece.bytes()) / sizeof(float));
  return n;
}

// Ranks [0, whole) have all b floats of the bucket inside the buffer; the next may have part of
// them, and the rest none (padding).
namespace {
int whole_ranks(int64_t total, int64_t chunk, int64_t at, int64_t b, int world) {
  if (chunk == 0 || total - at - b < 0) return 0;
  return int(std::min<int64_t>((total - at - b) / chunk + 1, world));
}
}  // namespace

void Zero1Sync::pack(int64_t at, int64_t b, const GradInput& grads, float* staging) const {
  const int64_t chunk = layout_.chunk(), total = layout_.total;
  const int whole = grads.full ? whole_ranks(total, chunk, at, b, layout_.world) : 0;
  if (whole > 0) be_->copy_rows(staging, size_t(b), grads.full + at, size_t(chunk), whole, int(b));
  for (int r = whole; r < layout_.world; ++r) {
    const int64_t src = int64_t(r) * chunk + at;
    const int64_t n = std::clamp<int64_t>(total - src, 0, b);
    float* dst = staging + size_t(r) * size_t(b);
    if (n > 0 && grads.full) be_->copy(dst, grads.full + src, size_t(n) * sizeof(float));
    if (n > 0 && grads.source) (*grads.source)(src, n, dst);
    if (n == 0) {  // this rank and every later one: padding
      be_->fill(dst, size_t(layout_.world - r) * size_t(b), 0.0f);
      break;
    }
    be_->fill(dst + n, size_t(b - n), 0.0f);
  }
}

void Zero1Sync::unpack(int64_t at, int64_t b, const float* staging, float* weights) const {
  const int64_t chunk = layout_.chunk(), total = layout_.total;
  const int whole = whole_ranks(total, chunk, at, b, layout_.world);
  if (whole > 0) be_->copy_rows(weights + at, size_t(chunk), staging, size_t(b), whole, int(b));
  for (int r = whole; r < layout_.world; ++r) {
    const int64_t dst = int64_t(r) * chunk + at;
    const int64_t n = std::clamp<int64_t>(total - dst, 0, b);
    if (n == 0) break;
    be_->copy(weights + dst, staging + size_t(r) * size_t(b), size_t(n) * sizeof(float));
  }
}

void Zero1Sync::for_each_piece(
    int64_t at, int64_t b, const std::function<void(int r, int64_t offset, int64_t n)>& fn) const {
  const int64_t chunk = layout_.chunk(), total = layout_.total;
  for (int r = 0; r < layout_.world; ++r) {
    const int64_t offset = int64_t(r) * chunk + at;
    const int64_t n = std::clamp<int64_t>(total - offset, 0, b);
    if (n == 0) break;  // this rank and every later one: padding
    fn(r, offset, n);
  }
}

void Zero1Sync::unpack(int64_t at, int64_t b, const float* staging, const WeightSink& store) const {
  for_each_piece(at, b, [&](int r, int64_t offset, int64_t n) {
    store(offset, staging + size_t(r) * size_t(b), n);
  });
}

void Zero1Sync::reduce_scatter_grads(const float* full_grads, float* shard_grads) {
  reduce_scatter(GradInput{full_grads, nullptr}, shard_grads);
}

void Zero1Sync::reduce_scatter_grads(const GradSource& source, float* shard_grads) {
  reduce_scatter(GradInput{nullptr, &source}, shard_grads);
}

void Zero1Sync::reduce_scatter(const GradInput& grads, float* shard_grads) {
  ZAYA_CHECK(!reducing_, "Zero1Sync: reduce_scatter_grads during an overlapped reduce");
  ZAYA_CHECK(!gather_only_, "Zero1Sync: built for the all-gather alone");
  const int64_t chunk = layout_.chunk();
  Slot& s = slots_[0];
  for (int64_t at = 0; at < chunk; at += bucket_) {
    const int64_t b = std::min(bucket_, chunk - at);
    pack(at, b, grads, s.staging.floats());
    comm_.reduce_scatter(s.staging.floats(), s.piece.floats(), size_t(b), DType::F32,
                         dist::ReduceOp::Sum);
    const int64_t keep = std::clamp<int64_t>(layout_.size() - at, 0, b);
    be_->copy(shard_grads + at, s.piece.floats(), size_t(keep) * sizeof(float));
  }
}

void Zero1Sync::begin_reduce(const float* full_grads, float* shard_grads) {
  begin(GradInput{full_grads, nullptr}, shard_grads);
}

void Zero1Sync::begin_reduce(const GradSource& source, float* shard_grads) {
  source_ = source;
  begin(GradInput{nullptr, &source_}, shard_grads);
}

void Zero1Sync::begin(const GradInput& grads, float* shard_grads) {
  ZAYA_CHECK(!reducing_, "Zero1Sync: begin_reduce while another reduce is in progress");
  ZAYA_CHECK(!gather_only_, "Zero1Sync: built for the all-gather alone");
  reducing_ = true;
  input_ = grads;
  shard_ = shard_grads;
  next_at_ = (bucket_count() - 1) * bucket_;
  final_from_ = layout_.total;
  overlapped_ = 0;
}

void Zero1Sync::grads_final_from(int64_t offset) {
  ZAYA_CHECK(reducing_, "Zero1Sync: grads_final_from outside begin_reduce/finish_reduce");
  final_from_ = std::min(final_from_, offset);
  const int64_t before = next_at_;
  start_final_buckets(false);
  overlapped_ += (before - next_at_) / bucket_;
  for (Slot& s : slots_)  // let the others move too
    if (s.transfer) s.transfer->test();
}

void Zero1Sync::finish_reduce() {
  ZAYA_CHECK(reducing_, "Zero1Sync: finish_reduce without begin_reduce");
  final_from_ = 0;
  start_final_buckets(true);
  for (int i = 0; i < kInFlight; ++i) complete(slots_[(next_slot_ + i) % kInFlight]);
  reducing_ = false;
  input_ = GradInput{};
  source_ = nullptr;
  shard_ = nullptr;
}

void Zero1Sync::start_final_buckets(bool block) {
  // Bucket `at` holds [r·chunk + at, …) of every rank r: rank 0's range is the lowest.
  while (next_at_ >= 0 && next_at_ >= final_from_) {
    Slot& s = slots_[next_slot_];  // the oldest bucket in flight, or a free slot
    if (s.transfer && !block && !s.transfer->test()) return;
    complete(s);
    next_slot_ = (next_slot_ + 1) % kInFlight;
    const int64_t b = std::min(bucket_, layout_.chunk() - next_at_);
    pack(next_at_, b, input_, s.staging.floats());
    s.at = next_at_;
    s.transfer = comm_.start_reduce_scatter(s.staging.floats(), s.piece.floats(), size_t(b),
                                            DType::F32, dist::ReduceOp::Sum);
    next_at_ -= bucket_;
  }
}

void Zero1Sync::complete(Slot& s) {
  if (!s.transfer) return;
  s.transfer->wait();
  s.transfer.reset();
  const int64_t keep = std::clamp<int64_t>(layout_.size() - s.at, 0, bucket_);
  be_->copy(shard_ + s.at, s.piece.floats(), size_t(keep) * sizeof(float));
  s.at = -1;
}

void Zero1Sync::all_gather_weights(float* weights) {
  gather(weights + layout_.begin(),
         [&](int64_t at, int64_t b, const float* staging) { unpack(at, b, staging, weights); });
}

void Zero1Sync::all_gather_weights(const float* shard_weights, const WeightSink& store) {
  gather(shard_weights,
         [&](int64_t at, int64_t b, const float* staging) { unpack(at, b, staging, store); });
}

const std::vector<int64_t>& Zero1Sync::bucket_halves(const WeightCodec& codec) {
  if (!bucket_halves_.empty()) return bucket_halves_;
  for (int64_t at = 0; at < layout_.chunk(); at += bucket_) {
    const int64_t b = std::min(bucket_, layout_.chunk() - at);
    int64_t most = 0;
    for_each_piece(at, b, [&](int, int64_t offset, int64_t n) {
      most = std::max(most, codec.fp32_count(offset, n));
    });
    // bf16 values (b, padded to even so the fp32 ones stay aligned) + 2 halves per fp32 value,
    // against 2 halves per value in fp32.
    const int64_t halves = b + (b & 1) + 2 * most;
    bucket_halves_.push_back(halves < 2 * b ? halves : -1);
  }
  return bucket_halves_;
}

void Zero1Sync::all_gather_weights(const float* shard_weights, const WeightCodec& codec) {
  const std::vector<int64_t>& halves_of = bucket_halves(codec);
  // The piece and staging buffers hold b and b·world floats: 2b and 2b·world halves.
  auto* piece = static_cast<uint16_t*>(slots_[0].piece.get());
  auto* staging = static_cast<uint16_t*>(slots_[0].staging.get());
  for (int64_t at = 0, k = 0; at < layout_.chunk(); at += bucket_, ++k) {
    const int64_t b = std::min(bucket_, layout_.chunk() - at), halves = halves_of[size_t(k)];
    if (halves < 0) {  // as all_gather_weights with a sink
      unpack(at, b, gather_bucket(at, b, shard_weights), codec.store_fp32);
      continue;
    }
    const int64_t mine = std::clamp<int64_t>(layout_.size() - at, 0, b), even = b + (b & 1);
    be_->fill_zero(piece, size_t(halves) * sizeof(uint16_t));  // no unset bytes on the wire
    if (mine > 0)
      codec.pack(layout_.begin() + at, mine, shard_weights + at, piece,
                 reinterpret_cast<float*>(piece + even));
    comm_.all_gather(piece, staging, size_t(halves), DType::BF16);
    for_each_piece(at, b, [&](int r, int64_t offset, int64_t n) {
      const uint16_t* in = staging + size_t(r) * size_t(halves);
      codec.store(offset, n, in, reinterpret_cast<const float*>(in + even));
    });
  }
}

int64_t Zero1Sync::bytes_per_step(const WeightCodec& codec) {
  const std::vector<int64_t>& halves_of = bucket_halves(codec);
  int64_t gather = 0;  // bytes of one rank's pieces, all buckets
  for (int64_t at = 0, k = 0; at < layout_.chunk(); at += bucket_, ++k) {
    const int64_t b = std::min(bucket_, layout_.chunk() - at), halves = halves_of[size_t(k)];
    gather += halves < 0 ? 4 * b : 2 * halves;
  }
  const int64_t others = layout_.world - 1;
  return (4 * layout_.padded() * others + gather * int64_t(layout_.world) * others) /
         std::max(layout_.world, 1);
}

void Zero1Sync::gather(const float* shard_weights,
                       const std::function<void(int64_t, int64_t, const float*)>& unpack_bucket) {
  for (int64_t at = 0; at < layout_.chunk(); at += bucket_) {
    const int64_t b = std::min(bucket_, layout_.chunk() - at);
    unpack_bucket(at, b, gather_bucket(at, b, shard_weights));  // this rank's own range too
  }
}

const float* Zero1Sync::gather_bucket(int64_t at, int64_t b, const float* shard_weights) {
  float* piece = slots_[0].piece.floats();
  float* staging = slots_[0].staging.floats();
  const int64_t mine = std::clamp<int64_t>(layout_.size() - at, 0, b);
  if (mine > 0) be_->copy(piece, shard_weights + at, size_t(mine) * sizeof(float));
  be_->fill(piece + mine, size_t(b - mine), 0.0f);
  comm_.all_gather(piece, staging, size_t(b), DType::F32);
  return staging;
}

int64_t Zero1Sync::bytes_per_step() const {
  // reduce-scatter sends (world−1)/world of the padded buffer, all-gather the same again.
  const int64_t padded = layout_.padded();
  return 2 * padded * 4 * (layout_.world - 1) / std::max(layout_.world, 1);
}

}  // namespace zaya
