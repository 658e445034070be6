// What the parts of an interrupted `zaya data prepare` depend on (DIR/NAME/.prepare/plan.json):
// the input files (path, size, modification time), the reading and cleaning options and the
// tokenizer. `--resume` continues only under the same plan; the split, shard and dedup options
// are applied after the parts (by DocumentSink) and may differ. Also which rank tokenizes which
// input file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/prepare.h"

namespace zaya {

nlohmann::json parts_plan(const PrepareOptions& options, const std::vector<std::string>& files,
                          const TextEncoder& encoder);

// "" when `before` and `now` agree; else the first difference, in words.
std::string plan_difference(const nlohmann::json& before, const nlohmann::json& now);

// The input files rank `rank` of `world` tokenizes: the largest file first to the rank with the
// fewest bytes so far (ties: the lower rank). A pure function of the sizes, so every rank agrees.
std::vector<int> files_of_rank(const std::vector<int64_t>& sizes, int rank, int world);

}  // namespace zaya
