// Validation loss for `zaya train`: the first `windows` validation windows of every source, split
// over the ranks (window i goes to rank i mod world), losses summed over ranks in rank order.
#pragma once

#include <cstdint>

namespace zaya {

class ZayaModel;
class DataLoader;
namespace dist {
class Communicator;
}

struct EvalResult {
  double loss = 0;     // mean next-token loss over the windows' targets
  double unigram = 0;  // entropy of those targets under their own unigram distribution: the
                       // best any unigram model could do on exactly these tokens
  int64_t tokens = 0;
};

// Collective when comm has several ranks (the data-parallel group: under context parallelism the
// ranks of the model's context group share each window). Throws when the validation split has no
// window.
EvalResult evaluate(ZayaModel& model, const DataLoader& loader, int seq_len, int windows,
                    int micro_batch, dist::Communicator* comm);

}  // namespace zaya
