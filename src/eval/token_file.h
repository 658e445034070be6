// Token ids for `zaya score`: a JSON file holding a list of ids (one sequence) or a list of
// equal-length lists (a batch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

// A batch of equal-length sequences, row-major [batch, seq].
struct TokenBatch {
  std::vector<int32_t> tokens;
  int batch = 0, seq = 0;
};

// Errors name the file and the offending entry (not a list, ragged rows, a non-integer or
// negative id, an empty batch).
TokenBatch read_token_file(const std::string& path);

}  // namespace zaya
