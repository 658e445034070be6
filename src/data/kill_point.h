// A test hook for the restart drills of `zaya data prepare --resume`: with
// ZAYA_PREPARE_KILL_AT=POINT:N in the environment, the N-th time (counted from 1) the process
// passes kill_point(POINT) it sends itself SIGKILL, as an operator's kill -9 would at exactly that
// moment. Points: part-write, part-commit, shard-write, shard-commit, index-commit, cleanup
// (docs/data-format.md). Without the variable it costs one load of a cached flag.
#pragma once

namespace zaya {

void kill_point(const char* point);

}  // namespace zaya
