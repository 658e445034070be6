// read_safetensors: the u64 header length, the JSON header (dtype, shape, data_offsets,
// __metadata__) and the data section, including the F16/F64 conversions.
#include "io/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::write_input("x.safetensors", data, size);
  ZAYA_FUZZ_EXPECT_ERRORS(zaya::read_safetensors(path));
  return 0;
}
