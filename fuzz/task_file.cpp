// A `zaya eval --tasks` file, or a task file of a training config's "eval" section
// (eval/task_file.h): JSON lines from anywhere. Lines are bounded by a small --max-record-bytes so
// that the limit's path runs too; zaya::Error is the answer to bad input.
#include "eval/task_file.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::write_input("task.jsonl", data, size);
  ZAYA_FUZZ_EXPECT_ERRORS(zaya::read_task_file(path, std::nullopt, 4096));
  return 0;
}
