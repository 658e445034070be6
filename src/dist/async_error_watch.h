// A watch on a device communicator's asynchronous errors. NCCL (RCCL) runs a collective as
// kernels: a peer that died or a network that failed leaves them spinning, and the host waiting
// on the stream waits forever unless something reads the error NCCL records on the side
// (ncclCommGetAsyncError) and aborts the communicator (ncclCommAbort), which ends the kernels
// and lets the wait return. This runs that check on a thread of its own every `interval_s`:
// the first error is kept and `abort` called once; the communicator then calls check() after
// each wait, which throws the error naming the call. A collective that merely takes too long is
// the collective watchdog's (collective_watchdog.h, through the WatchedCommunicator around the
// device communicator): it names the ranks that never entered.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace zaya::dist {

class AsyncErrorWatch {
 public:
  // `poll` returns the library's asynchronous error, "" while there is none; `abort` aborts the
  // communicator. Both run on the watch's thread.
  AsyncErrorWatch(std::function<std::string()> poll, std::function<void()> abort,
                  double interval_s = 0.1);
  ~AsyncErrorWatch();
  AsyncErrorWatch(const AsyncErrorWatch&) = delete;
  AsyncErrorWatch& operator=(const AsyncErrorWatch&) = delete;

  // Throws zaya::Error naming `call` when an error was seen (the communicator is then aborted
  // and every later call fails the same way).
  void check(const char* call);
  // The error seen, "" if none.
  std::string error();

 private:
  void run();
  std::function<std::string()> poll_;
  std::function<void()> abort_;
  const double interval_s_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string error_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace zaya::dist
