// The communicators of a training run: the world the launcher gives (dist/make_communicator), on
// several ranks with every collective watched (dist/collective_watchdog.h: --collective-timeout,
// --collective-timeout-kind), and with --trace every collective a span
// (dist/traced_communicator.h). The groups of a rank grid split from it are watched and traced the
// same way.
#pragma once

#include <memory>

#include "dist/collective_watchdog.h"
#include "dist/communicator.h"
#include "train/trainer.h"

namespace zaya {

struct RunWorld {
  // Declared first: the communicators register their waits with it, so it outlives them.
  std::unique_ptr<dist::CollectiveWatchdog> watchdog;  // none on one rank or with a timeout of 0
  std::unique_ptr<dist::Communicator> comm;
  // A device's own collectives (NCCL: Device::make_collective) watched and traced as the world's
  // are, as the group "device"; null stays null.
  std::unique_ptr<dist::Communicator> wrap_device(std::unique_ptr<dist::Communicator> device,
                                                  const TrainOptions& opt);
};

RunWorld open_run_world(const TrainOptions& opt);

}  // namespace zaya
