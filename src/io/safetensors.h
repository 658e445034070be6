// The safetensors format (Hugging Face): u64 little-endian header length, a JSON header mapping
// each tensor name to {dtype, shape, data_offsets [begin, end)} relative to the data section, an
// optional "__metadata__" string map, then the raw little-endian data.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace zaya {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// Reads and validates the whole file. Errors name the file and the tensor or field at fault
// (truncated data, overlapping or out-of-range offsets, an unknown dtype, a shape/size mismatch).
// F16 and F64 tensors are converted to F32 on load; F32, BF16 and I32 are kept as they are.
SafetensorsFile read_safetensors(const std::string& path);

// Writes tensors in the given order (F32, BF16 or I32) via a temporary file and an atomic rename.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace zaya
