#include "train/run_world.h"

#include <cstdio>
#include <string>

#include "dist/traced_communicator.h"
#include "dist/watched_communicator.h"

namespace zaya {

RunWorld open_run_world(const TrainOptions& opt) {
  RunWorld world;
  world.comm = dist::make_communicator();
  if (world.comm->world_size() > 1 && opt.collective_timeouts.default_s > 0) {
    // The report is one line on stderr, written at once (one write: ranks' lines do not mix
    // under the launcher): the supervisor reads it there, and so does a person.
    world.watchdog = std::make_unique<dist::CollectiveWatchdog>(
        opt.collective_timeouts, world.comm->rank(),
        [](const dist::CollectiveWait& w) {
          const std::string line = dist::collective_timeout_line(w) + "\n";
          std::fwrite(line.data(), 1, line.size(), stderr);
          std::fflush(stderr);
        },
        opt.collective_abort_after_s);
    world.comm = std::make_unique<dist::WatchedCommunicator>(std::move(world.comm), *world.watchdog,
                                                             "world");
  }
  if (!opt.trace_path.empty())
    world.comm = std::make_unique<dist::TracedCommunicator>(std::move(world.comm), "world");
  return world;
}

std::unique_ptr<dist::Communicator> RunWorld::wrap_device(
    std::unique_ptr<dist::Communicator> device, const TrainOptions& opt) {
  if (!device) return device;
  if (watchdog)
    device = std::make_unique<dist::WatchedCommunicator>(std::move(device), *watchdog, "device");
  if (!opt.trace_path.empty())
    device = std::make_unique<dist::TracedCommunicator>(std::move(device), "device");
  return device;
}

}  // namespace zaya
