#include "train/stop_signals.h"

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace zaya {

namespace {

std::atomic<int> g_interrupts{0};
std::atomic<int> g_signal{0};

extern "C" void trainer_on_stop_signal(int sig) {
  if (g_interrupts.fetch_add(1) >= 1 && sig == SIGINT) std::_Exit(130);
  g_signal = sig;
}

}  // namespace

StopSignals::StopSignals() {
  g_interrupts = 0;
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = trainer_on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a signal must not fail a write in progress with EINTR
  for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &sa, &previous_[i]);
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
}

bool StopSignals::requested() const {
  return g_interrupts > 0;
}

std::string StopSignals::name() const {
  switch (g_signal.load()) {
    case 0:
      return "a signal to another rank";
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "a signal";
  }
}

}  // namespace zaya
