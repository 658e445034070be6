#include "ckpt/write_hook.h"

#include <mutex>

#include "core/error.h"

namespace zaya {

namespace {

std::mutex g_hook_mutex;
CheckpointWriteHook g_hook;

}  // namespace

void run_checkpoint_write_hook(int64_t step) {
  CheckpointWriteHook hook;
  {
    const std::lock_guard<std::mutex> lock(g_hook_mutex);
    hook = g_hook;
  }
  if (hook) hook(step);
}

ScopedCheckpointWriteHook::ScopedCheckpointWriteHook(CheckpointWriteHook hook) {
  const std::lock_guard<std::mutex> lock(g_hook_mutex);
  ZAYA_CHECK(!g_hook, "a checkpoint write hook is already installed");
  g_hook = std::move(hook);
}

ScopedCheckpointWriteHook::~ScopedCheckpointWriteHook() {
  const std::lock_guard<std::mutex> lock(g_hook_mutex);
  g_hook = nullptr;
}

}  // namespace zaya
