// model.safetensors.index.json of a sharded Hugging Face model directory (read_weight_index).
#include "fuzz_util.h"
#include "model/weights_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::write_input("model.safetensors.index.json", data, size);
  ZAYA_FUZZ_EXPECT_ERRORS(zaya::read_weight_index(path));
  return 0;
}
