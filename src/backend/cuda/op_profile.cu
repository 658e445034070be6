#include "backend/cuda/op_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cuda/vendor.h"

namespace zaya::cuda {
namespace {

struct Timing {
  ProfileKind kind;
  std::string name;
  cudaEvent_t start, stop;
};

struct Totals {
  long calls = 0;
  double ms = 0;
};

// The timings not yet read, and the totals of those read. Timings are read (a wait for the
// device) only when no timer is open, every 512 of them and at exit: reading one whose stop has
// not been recorded yet would fail.
class Profile {
 public:
  static Profile& instance() {
    static Profile* profile = [] {
      auto* p = new Profile;  // never destroyed: the atexit report reads it
      std::atexit([] { instance().report(); });
      return p;
    }();
    return *profile;
  }

  int start(ProfileKind kind, std::string name) {
    const std::lock_guard<std::mutex> lock(mutex_);
    Timing t{kind, std::move(name), take_event(), take_event()};
    if (!first_) {
      first_ = take_event();
      (void)cudaEventRecord(first_, nullptr);
    }
    (void)cudaEventRecord(t.start, nullptr);
    pending_.push_back(std::move(t));
    ++open_;
    return int(pending_.size()) - 1;
  }

  void stop(int slot) {
    const std::lock_guard<std::mutex> lock(mutex_);
    (void)cudaEventRecord(pending_[size_t(slot)].stop, nullptr);
    last_stop_ = pending_[size_t(slot)].stop;
    if (--open_ == 0 && pending_.size() >= 512) read_pending();
  }

 private:
  cudaEvent_t take_event() {
    if (free_.empty()) {
      cudaEvent_t e = nullptr;
      (void)cudaEventCreate(&e);
      return e;
    }
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }

  void read_pending() {
    if (last_stop_) (void)cudaEventSynchronize(last_stop_);
    for (Timing& t : pending_) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, t.start, t.stop) == cudaSuccess) {
        Totals& total = totals_[{int(t.kind), t.name}];
        ++total.calls;
        total.ms += double(ms);
      }
      float since_first = 0;
      if (cudaEventElapsedTime(&since_first, first_, t.stop) == cudaSuccess)
        span_ms_ = std::max(span_ms_, double(since_first));
      free_.push_back(t.start);
      free_.push_back(t.stop);
    }
    (void)cudaGetLastError();  // a failed reading is dropped, not left for the next check
    pending_.clear();
  }

  void report() {
    const char* path = std::getenv("ZAYA_CUDA_OP_PROFILE");
    const std::lock_guard<std::mutex> lock(mutex_);
    if (open_ == 0) read_pending();
    FILE* f = path ? std::fopen(path, "w") : nullptr;
    if (!f) {
      std::fprintf(stderr, "zaya: cannot write the op profile to %s\n", path ? path : "(unset)");
      return;
    }
    std::vector<std::pair<std::pair<int, std::string>, Totals>> rows(totals_.begin(),
                                                                     totals_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double op_ms = 0, gemm_ms = 0;
    for (const auto& [key, t] : rows) (key.first == int(ProfileKind::Op) ? op_ms : gemm_ms) += t.ms;
    std::fprintf(f,
                 "# device time in ops %.1f ms (cuBLASLt products %.1f ms of it) over %.1f ms from "
                 "the first op's start to the last one's end: the device was busy %.1f %%\n",
                 op_ms, gemm_ms, span_ms_, span_ms_ > 0 ? 100.0 * op_ms / span_ms_ : 0.0);
    std::fprintf(f, "kind\tname\tcalls\ttotal_ms\tshare_of_ops\tmean_us\n");
    for (const auto& [key, t] : rows)
      std::fprintf(f, "%s\t%s\t%ld\t%.3f\t%.2f%%\t%.1f\n",
                   key.first == int(ProfileKind::Op) ? "op" : "gemm", key.second.c_str(), t.calls,
                   t.ms, op_ms > 0 ? 100.0 * t.ms / op_ms : 0.0, 1e3 * t.ms / double(t.calls));
    std::fclose(f);
  }

  std::mutex mutex_;
  std::vector<Timing> pending_;
  std::vector<cudaEvent_t> free_;
  std::map<std::pair<int, std::string>, Totals> totals_;
  cudaEvent_t first_ = nullptr, last_stop_ = nullptr;
  double span_ms_ = 0;
  int open_ = 0;
};

}  // namespace

bool op_profile_enabled() {
  static const bool enabled = std::getenv("ZAYA_CUDA_OP_PROFILE") != nullptr;
  return enabled;
}

OpTimer::OpTimer(ProfileKind kind, const char* name) {
  if (op_profile_enabled()) start(kind, name);
}

OpTimer::OpTimer(ProfileKind kind, std::string name) {
  if (op_profile_enabled()) start(kind, std::move(name));
}

void OpTimer::start(ProfileKind kind, std::string name) {
  slot_ = Profile::instance().start(kind, std::move(name));
}

OpTimer::~OpTimer() {
  if (slot_ >= 0) Profile::instance().stop(slot_);
}

}  // namespace zaya::cuda
