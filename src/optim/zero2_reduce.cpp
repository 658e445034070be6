#include "optim/zero2_reduce.h"

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace zaya {

Zero2Reduce::Zero2Reduce(dist::Communicator& comm, int64_t total_floats, int64_t staging_floats,
                         const Backend* memory, bool from_source)
    : comm_(comm),
      be_(memory ? memory : &cpu_backend()),
      layout_{total_floats, comm.world_size(), comm.rank()} {
  ZAYA_CHECK(staging_floats > 0, "Zero2Reduce: the staging size must be > 0 floats, got ",
             staging_floats);
  const int64_t b = Zero1Sync::bucket_for(staging_floats, layout_.world, layout_.chunk());
  for (int owner = layout_.world - 1; owner >= 0; --owner) {
    const int64_t lo = layout_.begin_of(owner), hi = layout_.end_of(owner);
    if (hi <= lo) continue;
    // The range's buckets from its end down, at lo + k·b.
    for (int64_t k = (hi - lo - 1) / b; k >= 0; --k) {
      const int64_t at = lo + k * b;
      buckets_.push_back({at, std::min(b, hi - at), owner});
    }
  }
  const int64_t largest = buckets_.empty() ? 0 : b;
  for (Slot& s : slots_) {
    if (from_source) s.send = BackendBuffer(*be_, sizeof(float) * size_t(largest));
    s.sum = BackendBuffer(*be_, sizeof(float) * size_t(largest));
  }
}

int64_t Zero2Reduce::buffer_floats() const {
  int64_t n = 0;
  for (const Slot& s : slots_) n += int64_t((s.send.bytes() + s.sum.bytes()) / sizeof(float));
  const int64_t b = buckets_.empty() ? 0 : int64_t(slots_[0].sum.bytes() / sizeof(float));
  return n + kInFlight * b * layout_.world;
}

void Zero2Reduce::begin(const float* full_grads, float* shard_grads, bool accumulate,
                        Release release) {
  begin(full_grads, nullptr, shard_grads, accumulate, std::move(release));
}

void Zero2Reduce::begin(const GradSource& source, float* shard_grads, bool accumulate,
                        Release release) {
  ZAYA_CHECK(buckets_.empty() || slots_[0].send.bytes() > 0,
             "Zero2Reduce: gradients from a source need one built with from_source");
  begin(nullptr, &source, shard_grads, accumulate, std::move(release));
}

void Zero2Reduce::begin(const float* full_grads, const GradSource* source, float* shard_grads,
                        bool accumulate, Release release) {
  ZAYA_CHECK(!reducing_, "Zero2Reduce: begin while another reduce is in progress");
  reducing_ = true;
  full_ = full_grads;
  source_ = source ? *source : GradSource();
  shard_ = shard_grads;
  accumulate_ = accumulate;
  release_ = std::move(release);
  next_ = 0;
  final_from_ = layout_.total;
  next_slot_ = 0;
  overlapped_ = 0;
}

void Zero2Reduce::grads_final_from(int64_t offset) {
  ZAYA_CHECK(reducing_, "Zero2Reduce: grads_final_from outside begin/finish");
  // What was final at the previous report has had a stage's backward to move: it is moved and
  // given back now, so that a rank holds the stage being written and the one before it, not
  // every stage whose buckets are still waiting for a slot.
  drain_from(final_from_);
  final_from_ = std::min(final_from_, offset);
  const size_t before = next_;
  start_final_buckets(false);
  overlapped_ += int64_t(next_ - before);
  for (Slot& s : slots_)  // let the others move too
    if (s.transfer) s.transfer->test();
}

void Zero2Reduce::drain_from(int64_t offset) {
  const int64_t keep = final_from_;
  final_from_ = std::max(offset, final_from_);
  start_final_buckets(true);
  final_from_ = keep;
  for (int i = 0; i < kInFlight; ++i) {  // oldest first: the highest offsets
    Slot& s = slots_[(next_slot_ + i) % kInFlight];
    if (s.transfer && buckets_[size_t(s.bucket)].offset >= offset) complete(s);
  }
}

void Zero2Reduce::finish() {
  ZAYA_CHECK(reducing_, "Zero2Reduce: finish without begin");
  final_from_ = 0;
  start_final_buckets(true);
  for (int i = 0; i < kInFlight; ++i) complete(slots_[(next_slot_ + i) % kInFlight]);
  reducing_ = false;
  full_ = nullptr;
  source_ = nullptr;
  shard_ = nullptr;
  release_ = nullptr;
}

void Zero2Reduce::start_final_buckets(bool block) {
  while (next_ < buckets_.size() && buckets_[next_].offset >= final_from_) {
    Slot& s = slots_[next_slot_];  // the oldest bucket in flight, or a free slot
    if (s.transfer && !block && !s.transfer->test()) return;
    complete(s);
    next_slot_ = (next_slot_ + 1) % kInFlight;
    const Bucket& k = buckets_[next_];
    const float* send = full_ ? full_ + k.offset : s.send.floats();
    if (!full_) source_(k.offset, k.n, s.send.floats());
    float* recv = nullptr;  // the owner's: straight into its shard, or beside it to be added
    if (k.owner == layout_.rank)
      recv = accumulate_ ? s.sum.floats() : shard_ + (k.offset - layout_.begin());
    s.transfer =
        comm_.start_reduce(send, recv, size_t(k.n), DType::F32, dist::ReduceOp::Sum, k.owner);
    s.bucket = int64_t(next_);
    ++next_;
  }
}

void Zero2Reduce::complete(Slot& s) {
  if (!s.transfer) return;
  s.transfer->wait();
  s.transfer.reset();
  const Bucket& k = buckets_[size_t(s.bucket)];
  if (k.owner == layout_.rank && accumulate_)
    be_->add_into(shard_ + (k.offset - layout_.begin()), s.sum.floats(), size_t(k.n));
  if (release_) release_(k.offset, k.n);
  s.bucket = -1;
}

}  // namespace zaya
