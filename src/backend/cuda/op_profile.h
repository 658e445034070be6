// Where a GPU step's time goes, op by op: with ZAYA_CUDA_OP_PROFILE=FILE in the environment,
// every backend op and every cuBLASLt product is timed between two events on the stream, and at
// exit FILE gets a table (calls, device milliseconds, share) of the ops and of the products by
// shape and alignment. The events add a few microseconds per op, so a profiled step is a little
// slower than a plain one; without the variable a timer costs one test of a cached flag.
// Plain C++: the .cu files and the backend use it alike.
#pragma once

#include <string>

namespace zaya::cuda {

enum class ProfileKind { Op, Gemm };

// Whether ZAYA_CUDA_OP_PROFILE is set (read once).
bool op_profile_enabled();

// Times the device work queued during its lifetime under `name`.
class OpTimer {
 public:
  OpTimer(ProfileKind kind, const char* name);
  OpTimer(ProfileKind kind, std::string name);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  void start(ProfileKind kind, std::string name);
  int slot_ = -1;  // the pending timing's index, -1 when not profiling
};

}  // namespace zaya::cuda
