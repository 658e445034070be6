// config.json of a Hugging Face model directory (read_hf_config: the ZAYA1 fields, fixed fields,
// ignored fields with warnings, then ModelConfig validation).
#include <vector>

#include "fuzz_util.h"
#include "model/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = zaya::fuzz::scratch_dir() + "/hf";
  static const bool made = std::filesystem::create_directories(dir) || true;
  (void)made;
  zaya::fuzz::write_input("hf/config.json", data, size);
  std::vector<std::string> warnings;
  ZAYA_FUZZ_EXPECT_ERRORS(zaya::read_hf_config(dir, &warnings));
  return 0;
}
