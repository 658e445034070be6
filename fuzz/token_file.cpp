// `zaya score --tokens`: a JSON list of ids or a batch of equal-length lists (read_token_file).
#include "eval/token_file.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::write_input("tokens.json", data, size);
  ZAYA_FUZZ_EXPECT_ERRORS(zaya::read_token_file(path));
  return 0;
}
