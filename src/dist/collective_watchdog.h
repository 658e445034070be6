// A watchdog for collectives. A collective that one rank never enters (a stopped process, a rank
// stuck in compute, a peer calling a different collective) blocks every other rank in it forever:
// MPI has no timeout, and NCCL's own ends in an error that does not say which rank was missing.
// Every wait in a collective is registered here (WatchedCommunicator does it for each call) with
// its group, its sequence number in that group (the same on every member for the same call) and
// the time it began. A thread of the watchdog checks the waits; one past its kind's timeout is
// reported once (the trainer writes it beside its heartbeats for the supervisor, and to stderr),
// and if it is still going `abort_after_s` later the process ends with kExitCollectiveTimeout:
// the launcher then stops the other ranks, and the supervisor, which has every waiting rank's
// report, names the ranks that never entered (aegis/collective_reports.h) and restarts the job.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace zaya::dist {

// The exit status of a rank whose collective timed out (GNU timeout's "timed out").
constexpr int kExitCollectiveTimeout = 124;

// The kinds of wait a watched communicator registers ("all_reduce", ..., "sendrecv").
const std::vector<std::string>& collective_kinds();

// How long a rank may wait in one collective before it is reported: per kind, else the default.
struct CollectiveTimeouts {
  double default_s = 600;
  std::map<std::string, double> by_kind;
  double for_kind(const std::string& kind) const;
};

// Adds "KIND=SECONDS" (zaya train --collective-timeout-kind) to `t`; an error names `flag`, the
// kinds and what was expected.
void add_kind_timeout(CollectiveTimeouts& t, const std::string& spec, const std::string& flag);

// One wait in a collective, as a rank reports it when it passed its timeout.
struct CollectiveWait {
  int rank = -1;             // the waiting rank (global)
  std::string group;         // "world", or the split it came from: "world/split(1)"
  std::vector<int> members;  // the group's global ranks, in the group's rank order
  // Collectives (every member takes part): the group's collectives so far on this rank, this
  // one included, the same number on every member for the same call. Point-to-point (send,
  // recv, sendrecv): the group's point-to-point calls so far on this rank, and the peers.
  int64_t seq = 0;
  std::vector<int> peers;  // global ranks; empty for a collective
  std::string kind;
  int64_t bytes = 0;
  double since = 0;     // unix seconds when the rank entered it
  double waited_s = 0;  // when reported
  double timeout_s = 0;
};

// The line a rank prints (stderr) when a wait passes its timeout: readable, then the wait as one
// JSON object, which the supervisor parses (aegis/collective_reports.h).
constexpr const char* kCollectiveTimeoutPrefix = "zaya: collective timeout: ";
std::string collective_timeout_line(const CollectiveWait& w);
// The wait of such a line; nullopt for any other line. A line with the prefix whose JSON is
// not a wait throws zaya::Error naming what is wrong.
std::optional<CollectiveWait> parse_collective_timeout_line(const std::string& line);

class CollectiveWatchdog {
 public:
  using Report = std::function<void(const CollectiveWait&)>;
  // `report` runs on the watchdog's thread, once for each wait past its timeout.
  CollectiveWatchdog(CollectiveTimeouts timeouts, int rank, Report report, double abort_after_s,
                     double poll_s = 0.05);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // A wait in progress: registered by begin(), ended by the destructor.
  class Wait {
   public:
    Wait(CollectiveWatchdog& dog, int64_t id) : dog_(&dog), id_(id) {}
    Wait(Wait&& other) noexcept : dog_(other.dog_), id_(other.id_) { other.dog_ = nullptr; }
    Wait(const Wait&) = delete;
    Wait& operator=(const Wait&) = delete;
    Wait& operator=(Wait&&) = delete;
    ~Wait();

   private:
    CollectiveWatchdog* dog_;
    int64_t id_;
  };
  Wait begin(const std::string& group, const std::vector<int>& members, int64_t seq,
             const char* kind, int64_t bytes, std::vector<int> peers = {});

  const CollectiveTimeouts& timeouts() const { return timeouts_; }

 private:
  struct Entry {
    CollectiveWait wait;
    double started = 0;  // steady-clock seconds
    bool reported = false;
  };
  void end(int64_t id);
  void run();

  const CollectiveTimeouts timeouts_;
  const int rank_;
  const Report report_;
  const double abort_after_s_, poll_s_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<int64_t, Entry> waits_;
  int64_t next_id_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace zaya::dist
