#include "train/fault_injection.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "io/text_file.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    const size_t next = s.find(sep, pos);
    parts.push_back(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) return parts;
    pos = next + 1;
  }
}

// A whole-string integer / number, or an error naming the item.
int64_t parse_int(const std::string& v, const std::string& item, const char* what) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  ZAYA_CHECK(!v.empty() && end && *end == '\0' && x >= 0, "ZAYA_FAULTS item '", item, "': ", what,
             " '", v, "' is not a non-negative integer");
  return x;
}

double parse_number(const std::string& v, const std::string& item, const char* what) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  ZAYA_CHECK(!v.empty() && end && *end == '\0', "ZAYA_FAULTS item '", item, "': ", what, " '", v,
             "' is not a number");
  return x;
}

FaultSpec parse_item(const std::string& item) {
  const std::vector<std::string> fields = split(item, ':');
  const std::string head = fields[0];
  const size_t at = head.find('@');
  const std::string kind = head.substr(0, at);
  FaultSpec f;
  f.text = item;
  if (kind == "kill")
    f.kind = FaultKind::Kill;
  else if (kind == "hang")
    f.kind = FaultKind::Hang;
  else if (kind == "nan")
    f.kind = FaultKind::Nan;
  else if (kind == "ckpt_die")
    f.kind = FaultKind::CkptDie;
  else if (kind == "slow")
    f.kind = FaultKind::Slow;
  else if (kind == "stop")
    f.kind = FaultKind::Stop;
  else
    ZAYA_FAIL("ZAYA_FAULTS item '", item, "': unknown fault '", kind,
              "' (expected kill, hang, stop, nan, ckpt_die or slow)");
  if (at != std::string::npos) {
    f.step = parse_int(head.substr(at + 1), item, "step");
    ZAYA_CHECK(f.step >= 1, "ZAYA_FAULTS item '", item, "': steps count from 1");
  } else {
    ZAYA_CHECK(f.kind == FaultKind::Slow, "ZAYA_FAULTS item '", item, "': '", kind,
               "' needs a step, e.g. ", kind, "@7");
  }
  for (size_t i = 1; i < fields.size(); ++i) {
    const size_t eq = fields[i].find('=');
    ZAYA_CHECK(eq != std::string::npos, "ZAYA_FAULTS item '", item, "': option '", fields[i],
               "' is not KEY=VALUE (expected rank=R or factor=F)");
    const std::string key = fields[i].substr(0, eq), value = fields[i].substr(eq + 1);
    if (key == "rank") {
      f.rank = int(parse_int(value, item, "rank"));
    } else if (key == "factor" && f.kind == FaultKind::Slow) {
      f.factor = parse_number(value, item, "factor");
      ZAYA_CHECK(f.factor >= 1, "ZAYA_FAULTS item '", item, "': factor must be >= 1");
    } else {
      ZAYA_FAIL("ZAYA_FAULTS item '", item, "': unknown option '", key, "' (expected rank",
                f.kind == FaultKind::Slow ? " or factor)" : ")");
    }
  }
  ZAYA_CHECK(f.kind != FaultKind::Slow || f.factor > 1, "ZAYA_FAULTS item '", item,
             "': slow needs factor=F with F > 1");
  return f;
}

}  // namespace

std::vector<FaultSpec> parse_fault_specs(const std::string& text) {
  std::vector<FaultSpec> faults;
  if (trim(text).empty()) return faults;
  for (const std::string& raw : split(text, ',')) {
    const std::string item = trim(raw);
    ZAYA_CHECK(!item.empty(), "ZAYA_FAULTS '", text, "': empty item (stray comma?)");
    faults.push_back(parse_item(item));
  }
  return faults;
}

FaultInjector::FaultInjector(std::vector<FaultSpec> faults, std::string out_dir, int rank)
    : faults_(std::move(faults)), out_dir_(std::move(out_dir)), rank_(rank) {}

FaultInjector FaultInjector::from_env(const std::string& out_dir, int rank) {
  const char* env = std::getenv("ZAYA_FAULTS");
  if (!env) return {};
  return FaultInjector(parse_fault_specs(env), out_dir, rank);
}

const FaultSpec* FaultInjector::claim(FaultKind kind, int64_t step) {
  for (const FaultSpec& f : faults_) {
    if (f.kind != kind || f.step != step || (f.rank >= 0 && f.rank != rank_)) continue;
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, ".rank-%05d", rank_);
    const fs::path dir = fs::path(out_dir_) / "faults";
    const fs::path marker = dir / (f.text + suffix);
    if (fs::exists(marker)) continue;  // fired before: the restarted job gets past it
    fs::create_directories(dir);
    write_file_atomically(marker.string(), "fired\n", /*durable=*/true);
    return &f;
  }
  return nullptr;
}

void FaultInjector::announce(const FaultSpec& f, const char* what) const {
  std::fprintf(stderr, "fault injection: %s on rank %d: %s\n", f.text.c_str(), rank_, what);
  std::fflush(stderr);
}

void FaultInjector::at_step_start(int64_t step) {
  if (faults_.empty()) return;
  if (const FaultSpec* f = claim(FaultKind::Kill, step)) {
    announce(*f, "SIGKILL");
    ::kill(::getpid(), SIGKILL);
  }
  if (const FaultSpec* f = claim(FaultKind::Hang, step)) {
    announce(*f, "hanging");
    while (true) ::pause();  // only a signal (the supervisor's SIGTERM/SIGKILL) ends this
  }
  if (const FaultSpec* f = claim(FaultKind::Stop, step)) {
    announce(*f, "SIGSTOP");
    ::raise(SIGSTOP);  // every thread stops, the collective watchdog's too; SIGCONT resumes
  }
  const auto now = std::chrono::steady_clock::now();
  double sleep_s = 0;
  for (const FaultSpec& f : faults_) {
    const bool mine = f.rank < 0 || f.rank == rank_;
    if (f.kind != FaultKind::Slow || !mine || step < f.step || last_step_ != step - 1) continue;
    // Stretch by the previous step's own length (its start to now, minus what we added).
    const double last = std::chrono::duration<double>(now - last_start_).count() - last_sleep_s_;
    sleep_s = std::max(sleep_s, (f.factor - 1) * last);
  }
  last_start_ = now;
  last_step_ = step;
  last_sleep_s_ = sleep_s;
  if (sleep_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
}

bool FaultInjector::loss_fault(int64_t step) {
  if (faults_.empty()) return false;
  const FaultSpec* f = claim(FaultKind::Nan, step);
  if (f) announce(*f, "NaN loss and gradients");
  return f != nullptr;
}

void FaultInjector::in_checkpoint_write(int64_t step) {
  if (faults_.empty()) return;
  if (const FaultSpec* f = claim(FaultKind::CkptDie, step)) {
    announce(*f, "dying in the middle of the checkpoint write");
    std::_Exit(137);  // no unwinding, no flushing: like a machine that lost power
  }
}

}  // namespace zaya
