// A whole zaya config (configs/*.json): the top level, then every section the way `zaya train`
// reads them (model, train, train.optim, data). data_config_from_json touches no files.
#include <nlohmann/json.hpp>

#include "data/data_config.h"
#include "fuzz_util.h"
#include "model/config.h"
#include "optim/optim_config.h"
#include "train/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::write_input("config.json", data, size);
  nlohmann::json root;
  ZAYA_FUZZ_EXPECT_ERRORS(root = zaya::read_config_file(path));
  if (!root.is_object()) return 0;
  // Each section on its own, so that a bad model section does not hide the data section.
  if (root.contains("model")) {
    ZAYA_FUZZ_EXPECT_ERRORS(zaya::model_config_from_json(root["model"], path));
  }
  if (root.contains("train")) {
    ZAYA_FUZZ_EXPECT_ERRORS({
      const zaya::TrainConfig tc = zaya::train_config_from_json(root["train"], path);
      zaya::optim_config_from_json(tc.optim, path);
    });
  }
  if (root.contains("data")) {
    ZAYA_FUZZ_EXPECT_ERRORS(zaya::data_config_from_json(root["data"], path));
  }
  return 0;
}
