// The "data" section of a zaya config: where prepared sources live and the training curriculum,
// a list of phases each with its own token budget, sequence length, RoPE theta and mixture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zaya {

struct DataPhase {
  std::string name;
  int64_t tokens = 0;           // token budget of this phase
  int64_t seq_len = 0;          // tokens per sample (each sample reads seq_len + 1)
  double rope_theta = 0;        // for the model during this phase
  std::vector<double> weights;  // one per DataConfig::sources, normalised to sum 1
  // Sequences per optimizer step in this phase; 0: train.global_batch. A context extension keeps
  // the tokens per step and takes fewer, longer sequences.
  int64_t global_batch = 0;
};

struct DataConfig {
  std::string dir = "data";          // prepared sources are dir/<source>/index.json
  std::vector<std::string> sources;  // order defines source indices
  std::vector<DataPhase> phases;     // run in order

  int64_t total_tokens() const;
  // Index of the phase that the token at offset `tokens_consumed` belongs to; past the last
  // budget this stays in the last phase (a run may overshoot its budget by a step).
  int phase_at(int64_t tokens_consumed) const;
};

// `j` is the "data" section; `where` names the file for messages ("config.json").
DataConfig data_config_from_json(const nlohmann::json& j, const std::string& where);
// Reads the "data" section of a zaya config file.
DataConfig load_data_config(const std::string& path);

}  // namespace zaya
