// The safetensors format (Hugging Face): u64 little-endian header length, a JSON header mapping
// each tensor name to {dtype, shape, data_offsets [begin, end)} relative to the data section, an
// optional "__metadata__" string map, then the raw little-endian data.
#pragma once

#include <cstdint>
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

// One tensor's place in a file: its dtype as stored ("F32", "BF16", "F16", "F64", "I32"), its
// shape, and its absolute byte range in the file.
struct SafetensorsEntry {
  std::string dtype;
  Shape shape;
  uint64_t offset = 0, bytes = 0;
};

struct SafetensorsIndex {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
};

// The header alone, validated as read_safetensors validates it (offsets inside the file, sizes
// that match the shapes, no overlap); no tensor data is read.
SafetensorsIndex read_safetensors_index(const std::string& path);

// Byte ranges of one file's tensors (pread), for loaders that need only parts of them: a resumed
// rank reads just the optimizer state of its own range (ckpt/checkpoint.h).
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const SafetensorsIndex& index() const { return index_; }
  // Elements [first, first + count) of the F32 tensor `name` into dst; errors name the file.
  void read_f32(const std::string& name, int64_t first, int64_t count, float* dst);
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  std::string path_;
  int fd_ = -1;
  SafetensorsIndex index_;
  uint64_t bytes_read_ = 0;
};

// Writes tensors in the given order (F32, BF16 or I32) via a temporary file and an atomic rename.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace zaya
