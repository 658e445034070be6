// The device communicator's watch on asynchronous errors (dist/async_error_watch.h), with a
// stand-in library: no error, no abort; an error appearing mid-wait aborts once and every later
// check names the call and the error.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "dist/async_error_watch.h"

namespace zaya::dist {
namespace {

TEST(AsyncErrorWatch, QuietLibraryNeverAborts) {
  std::atomic<int> polls{0}, aborts{0};
  {
    AsyncErrorWatch watch(
        [&] {
          ++polls;
          return std::string();
        },
        [&] { ++aborts; }, 0.001);
    while (polls < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_NO_THROW(watch.check("all_reduce"));
    EXPECT_EQ(watch.error(), "");
  }
  EXPECT_EQ(aborts, 0);
}

TEST(AsyncErrorWatch, AnErrorAbortsOnceAndEveryCheckNamesIt) {
  std::atomic<bool> failed{false};
  std::atomic<int> aborts{0};
  AsyncErrorWatch watch([&] { return failed ? std::string("remote process exited") : ""; },
                        [&] { ++aborts; }, 0.001);
  EXPECT_NO_THROW(watch.check("reduce_scatter"));
  failed = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (aborts == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(aborts, 1);
  for (const char* call : {"all_gather", "broadcast"}) {
    std::string message;
    try {
      watch.check(call);
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find(std::string(call) + ": the device communicator reported an error and "
                                               "was aborted: remote process exited"),
              std::string::npos)
        << message;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(aborts, 1);  // the watch stops at the first error
}

}  // namespace
}  // namespace zaya::dist
