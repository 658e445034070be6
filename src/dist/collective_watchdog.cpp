#include "dist/collective_watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya::dist {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string kinds_list() {
  std::string s;
  for (const std::string& k : collective_kinds()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

}  // namespace

const std::vector<std::string>& collective_kinds() {
  static const std::vector<std::string> kinds = {"all_reduce", "reduce_scatter", "all_gather",
                                                 "broadcast",  "send",           "recv",
                                                 "barrier",    "sendrecv",       "split"};
  return kinds;
}

double CollectiveTimeouts::for_kind(const std::string& kind) const {
  const auto it = by_kind.find(kind);
  return it == by_kind.end() ? default_s : it->second;
}

void add_kind_timeout(CollectiveTimeouts& t, const std::string& spec, const std::string& flag) {
  const size_t eq = spec.find('=');
  ZAYA_CHECK(eq != std::string::npos, flag, " '", spec,
             "': expected KIND=SECONDS with KIND one of ", kinds_list());
  const std::string kind = spec.substr(0, eq), value = spec.substr(eq + 1);
  const auto& kinds = collective_kinds();
  ZAYA_CHECK(std::find(kinds.begin(), kinds.end(), kind) != kinds.end(), flag, " '", spec,
             "': unknown collective '", kind, "' (expected one of ", kinds_list(), ")");
  char* end = nullptr;
  const double s = std::strtod(value.c_str(), &end);
  ZAYA_CHECK(!value.empty() && end && *end == '\0' && s > 0 && s < 1e9, flag, " '", spec, "': '",
             value, "' is not a positive number of seconds");
  t.by_kind[kind] = s;
}

std::string collective_timeout_line(const CollectiveWait& w) {
  const nlohmann::json j = {{"rank", w.rank},           {"group", w.group},
                            {"members", w.members},     {"seq", w.seq},
                            {"kind", w.kind},           {"bytes", w.bytes},
                            {"since", w.since},         {"waited_s", w.waited_s},
                            {"timeout_s", w.timeout_s}, {"peers", w.peers}};
  char head[256];
  std::snprintf(head, sizeof head,
                "rank %d has waited %.1f s in %s %s #%lld (%lld bytes; timeout %.3g s) ", w.rank,
                w.waited_s, w.group.c_str(), w.kind.c_str(), (long long)w.seq, (long long)w.bytes,
                w.timeout_s);
  return std::string(kCollectiveTimeoutPrefix) + head + j.dump();
}

std::optional<CollectiveWait> parse_collective_timeout_line(const std::string& line) {
  const size_t at = line.find(kCollectiveTimeoutPrefix);
  if (at == std::string::npos) return std::nullopt;
  const size_t brace = line.find('{', at);
  ZAYA_CHECK(brace != std::string::npos, "collective timeout line without its JSON report: '",
             line.substr(0, 200), "'");
  CollectiveWait w;
  try {
    const nlohmann::json j = nlohmann::json::parse(line.substr(brace));
    w.rank = j.at("rank").get<int>();
    w.group = j.at("group").get<std::string>();
    w.members = j.at("members").get<std::vector<int>>();
    w.seq = j.at("seq").get<int64_t>();
    w.kind = j.at("kind").get<std::string>();
    w.bytes = j.at("bytes").get<int64_t>();
    w.since = j.at("since").get<double>();
    w.waited_s = j.at("waited_s").get<double>();
    w.timeout_s = j.at("timeout_s").get<double>();
    w.peers = j.at("peers").get<std::vector<int>>();
  } catch (const nlohmann::json::exception& e) {
    ZAYA_FAIL("collective timeout line '", line.substr(0, 200), "': its report is not valid (",
              e.what(), ")");
  }
  return w;
}

CollectiveWatchdog::CollectiveWatchdog(CollectiveTimeouts timeouts, int rank, Report report,
                                       double abort_after_s, double poll_s)
    : timeouts_(std::move(timeouts)),
      rank_(rank),
      report_(std::move(report)),
      abort_after_s_(abort_after_s),
      poll_s_(poll_s),
      thread_([this] { run(); }) {}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

CollectiveWatchdog::Wait::~Wait() {
  if (dog_) dog_->end(id_);
}

CollectiveWatchdog::Wait CollectiveWatchdog::begin(const std::string& group,
                                                   const std::vector<int>& members, int64_t seq,
                                                   const char* kind, int64_t bytes,
                                                   std::vector<int> peers) {
  Entry e;
  e.wait.rank = rank_;
  e.wait.group = group;
  e.wait.members = members;
  e.wait.seq = seq;
  e.wait.kind = kind;
  e.wait.bytes = bytes;
  e.wait.peers = std::move(peers);
  e.wait.since = unix_seconds();
  e.wait.timeout_s = timeouts_.for_kind(kind);
  e.started = steady_seconds();
  const std::lock_guard lock(mutex_);
  const int64_t id = next_id_++;
  waits_.emplace(id, std::move(e));
  return Wait(*this, id);
}

void CollectiveWatchdog::end(int64_t id) {
  const std::lock_guard lock(mutex_);
  waits_.erase(id);
}

void CollectiveWatchdog::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::duration<double>(poll_s_));
    const double now = steady_seconds();
    std::vector<CollectiveWait> due;
    bool abort = false;
    for (auto& [id, e] : waits_) {
      const double waited = now - e.started;
      if (waited < e.wait.timeout_s) continue;
      if (!e.reported) {
        e.reported = true;
        e.wait.waited_s = waited;
        due.push_back(e.wait);
      } else if (waited >= e.wait.timeout_s + abort_after_s_) {
        abort = true;
      }
    }
    // The report writes files: without the lock, so that a wait that ends meanwhile is not held.
    lock.unlock();
    for (const CollectiveWait& w : due) report_(w);
    // The collective never returns (MPI cannot cancel one): end the process, as NCCL's watchdog
    // does, so that the launcher stops the job and a supervisor can restart it.
    if (abort) std::_Exit(kExitCollectiveTimeout);
    lock.lock();
  }
}

}  // namespace zaya::dist
