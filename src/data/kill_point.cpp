#include "data/kill_point.h"

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace zaya {

namespace {

struct KillAt {
  std::string point;
  long count = 0;  // 0: no hook
};

KillAt read_kill_at() {
  KillAt k;
  const char* v = std::getenv("ZAYA_PREPARE_KILL_AT");
  if (v == nullptr) return k;
  const char* colon = std::strrchr(v, ':');
  if (colon == nullptr) return k;
  k.point.assign(v, colon);
  k.count = std::strtol(colon + 1, nullptr, 10);
  return k;
}

}  // namespace

void kill_point(const char* point) {
  static const KillAt at = read_kill_at();
  static std::atomic<long> passed{0};
  if (at.count <= 0 || at.point != point) return;
  if (passed.fetch_add(1) + 1 == at.count) ::raise(SIGKILL);
}

}  // namespace zaya
