// What a finished `zaya train` run leaves besides metrics and checkpoints: the final model
// directory, the loss plot, samples from the model, and summary.json.
#pragma once

#include <string>

#include "train/train_config.h"
#include "train/trainer.h"

namespace zaya {

class Tokenizer;
class ZayaModel;
struct ComputeDevice;
namespace dist {
class Communicator;
}

// OUT/model, OUT/loss.svg and (with train.sample_tokens and a tokenizer, the one of
// train.tokenizer) OUT/samples.txt; fills summary.samples.
void write_run_outputs(TrainSummary& summary, ZayaModel& model, const TrainConfig& tc,
                       const Tokenizer* tokenizer, int32_t stop_token,
                       const std::string& config_path);
// Collective: every rank's peak resident memory and peak device memory into the summary.
void gather_memory_summary(TrainSummary& summary, dist::Communicator& comm,
                           const ComputeDevice& device);
// OUT/summary.json.
void write_run_summary(const TrainSummary& summary);

}  // namespace zaya
