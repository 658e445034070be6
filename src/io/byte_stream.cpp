#include "io/byte_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "io/decompress.h"
#include "io/input_files.h"

namespace zaya {

namespace {

// An uncompressed file: the bytes as they are, through the same interface.
class PlainStream final : public ByteStream {
 public:
  explicit PlainStream(std::unique_ptr<FileBytes> file) : file_(std::move(file)) {}
  size_t read(std::span<char> out) override { return file_->read(out); }
  int64_t file_offset() const override { return file_->offset(); }

 private:
  std::unique_ptr<FileBytes> file_;
};

// Reads the first bytes of `path` without consuming them from any stream.
std::vector<unsigned char> file_head(const std::string& path, size_t bytes) {
  FileBytes file(path);
  std::vector<unsigned char> head(bytes);
  size_t got = 0;
  while (got < bytes) {
    const size_t n = file.read({reinterpret_cast<char*>(head.data()) + got, bytes - got});
    if (n == 0) break;
    got += n;
  }
  head.resize(got);
  return head;
}

}  // namespace

Compression sniff_compression(std::span<const unsigned char> head) {
  if (head.size() >= 2 && head[0] == 0x1f && head[1] == 0x8b) return Compression::kGzip;
  if (head.size() >= 4 && head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd)
    return Compression::kZstd;
  return Compression::kNone;
}

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::kGzip:
      return "gzip";
    case Compression::kZstd:
      return "zstd";
    case Compression::kNone:
      break;
  }
  return "none";
}

FileBytes::FileBytes(std::string path) : path_(std::move(path)) {
  require_regular_file(path_);
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  ZAYA_CHECK(fd_ >= 0, path_, ": cannot open for reading: ", std::strerror(errno));
}

FileBytes::~FileBytes() {
  if (fd_ >= 0) ::close(fd_);
}

size_t FileBytes::read(std::span<char> out) {
  for (;;) {
    const ssize_t n = ::read(fd_, out.data(), out.size());
    if (n < 0 && errno == EINTR) continue;
    ZAYA_CHECK(n >= 0, path_, ": read failed at byte ", offset_, ": ", std::strerror(errno));
    offset_ += n;
    return size_t(n);
  }
}

std::unique_ptr<ByteStream> open_byte_stream(const std::string& path, Compression* found,
                                             const StreamLimits& limits) {
  const Compression c = sniff_compression(file_head(path, 4));
  if (found) *found = c;
  auto file = std::make_unique<FileBytes>(path);
  switch (c) {
    case Compression::kGzip:
      return make_gzip_stream(std::move(file), limits);
    case Compression::kZstd:
      return make_zstd_stream(std::move(file), limits);
    case Compression::kNone:
      break;
  }
  return std::make_unique<PlainStream>(std::move(file));
}

}  // namespace zaya
