// A process-wide hook that the checkpoint writer calls after the rank files are written and before
// the checkpoint is renamed into place: the trainer installs its fault injector here (Aegis drills
// "die in the middle of a checkpoint write") without the checkpoint code knowing about training.
#pragma once

#include <cstdint>
#include <functional>

namespace zaya {

using CheckpointWriteHook = std::function<void(int64_t step)>;

// Called from the writer (possibly a background thread); a no-op when no hook is installed.
void run_checkpoint_write_hook(int64_t step);

// Installs a hook for its lifetime; one at a time.
class ScopedCheckpointWriteHook {
 public:
  explicit ScopedCheckpointWriteHook(CheckpointWriteHook hook);
  ~ScopedCheckpointWriteHook();
  ScopedCheckpointWriteHook(const ScopedCheckpointWriteHook&) = delete;
  ScopedCheckpointWriteHook& operator=(const ScopedCheckpointWriteHook&) = delete;
};

}  // namespace zaya
