// A file's bytes in chunks, decompressed on the fly when the file's first bytes say it is gzip or
// zstd (the name is not trusted: a renamed file still reads). Memory is one chunk, whatever the
// file's size, so corpora far larger than RAM stream through.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace zaya {

enum class Compression { kNone, kGzip, kZstd };

// From the magic bytes: gzip 1f 8b, zstd frame 28 b5 2f fd; anything else is uncompressed.
Compression sniff_compression(std::span<const unsigned char> head);
const char* compression_name(Compression c);

// A compressed file that expands past this many times its compressed size is refused as a likely
// decompression bomb (10 GiB of zeros gzip to 10 MB, a ratio of 1000; text compresses 3 to 10
// times). Checked once the content passes kRatioFloorBytes, so that small files never trip it.
constexpr double kDefaultMaxDecompressionRatio = 100;
constexpr int64_t kRatioFloorBytes = int64_t(16) << 20;

struct StreamLimits {
  double max_ratio = kDefaultMaxDecompressionRatio;  // 0: no limit
};

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Fills `out` with up to out.size() bytes of content; returns 0 only at the end. A damaged or
  // truncated compressed stream throws zaya::Error naming the file and the compressed byte offset.
  virtual size_t read(std::span<char> out) = 0;
  // Bytes of the file consumed so far (compressed bytes for a compressed file).
  virtual int64_t file_offset() const = 0;
};

// Opens `path` (an error names it when it cannot be read or is not a regular file) and picks the
// decoder from its content. A decoder that expands past limits.max_ratio throws zaya::Error
// naming the file, the bytes seen and --max-decompression-ratio.
std::unique_ptr<ByteStream> open_byte_stream(const std::string& path, Compression* found = nullptr,
                                             const StreamLimits& limits = {});

// The raw file, read in chunks; the decompressors read through one.
class FileBytes {
 public:
  // Refuses anything but a regular file (a device, a FIFO, a directory) before opening it:
  // /dev/zero never ends, and opening a FIFO blocks until a writer comes.
  explicit FileBytes(std::string path);
  ~FileBytes();
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  size_t read(std::span<char> out);
  int64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t offset_ = 0;
};

}  // namespace zaya
