#include "io/decompress.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/error.h"

namespace zaya {

namespace {

constexpr size_t kInputChunk = size_t(1) << 18;

std::string bomb_megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / 1e6);
  return text;
}

// The compressed input both decoders share: a buffer refilled from the file, whether the file has
// ended, and the guard against decompression bombs.
struct CompressedInput {
  CompressedInput(std::unique_ptr<FileBytes> f, const StreamLimits& l)
      : file(std::move(f)), buffer(kInputChunk), limits(l) {}
  // Counts `produced` content bytes and refuses an expansion past the ratio. Called once per read
  // (a chunk of content), so a bomb is stopped after at most a chunk past the floor.
  void count_output(size_t produced) {
    content += int64_t(produced);
    if (limits.max_ratio <= 0 || content <= kRatioFloorBytes) return;
    const int64_t compressed = std::max<int64_t>(1, offset());
    const double ratio = double(content) / double(compressed);
    ZAYA_CHECK(ratio <= limits.max_ratio, file->path(), ": decompresses to ",
               bomb_megabytes(content), " from the first ", bomb_megabytes(compressed),
               " of the file (", int64_t(ratio), " times its size, above the limit of ",
               limits.max_ratio,
               "): refused as a likely decompression bomb; if the file is genuine, raise "
               "--max-decompression-ratio (0: no limit)");
  }
  // Refills when empty; false when the file has no more bytes.
  bool fill() {
    if (pos < size) return true;
    pos = 0;
    size = file->read(buffer);
    return size > 0;
  }
  // The file offset of the next unconsumed compressed byte (for messages).
  int64_t offset() const { return file->offset() - int64_t(size - pos); }

  std::unique_ptr<FileBytes> file;
  std::vector<char> buffer;
  size_t pos = 0, size = 0;
  StreamLimits limits;
  int64_t content = 0;  // decompressed bytes produced so far
};

class GzipStream final : public ByteStream {
 public:
  GzipStream(std::unique_ptr<FileBytes> file, const StreamLimits& limits)
      : in_(std::move(file), limits) {
    // 16 + MAX_WBITS: gzip wrapper only (a zlib or raw deflate stream is not a .gz file).
    ZAYA_CHECK(inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK, in_.file->path(),
               ": zlib could not start a gzip decoder");
  }
  ~GzipStream() override { inflateEnd(&z_); }
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  size_t read(std::span<char> out) override {
    size_t produced = 0;
    while (produced == 0 && !finished_) {
      // Output full last time: inflate may hold more of this member with no input left.
      if (!pending_ && !in_.fill()) {
        ZAYA_CHECK(!in_member_, in_.file->path(), ": truncated gzip stream: the file ends at byte ",
                   in_.offset(), " inside a compressed member");
        finished_ = true;
        break;
      }
      z_.next_in = reinterpret_cast<Bytef*>(in_.buffer.data() + in_.pos);
      z_.avail_in = uInt(in_.size - in_.pos);
      z_.next_out = reinterpret_cast<Bytef*>(out.data());
      z_.avail_out = uInt(out.size());
      in_member_ = true;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      in_.pos = in_.size - z_.avail_in;
      produced = out.size() - z_.avail_out;
      ZAYA_CHECK(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR, in_.file->path(),
                 ": damaged gzip stream near byte ", in_.offset(), ": ",
                 z_.msg ? z_.msg : "inflate failed");
      pending_ = z_.avail_out == 0 && rc != Z_STREAM_END;
      if (rc == Z_STREAM_END) {  // a member ends; another may follow (concatenated .gz files)
        in_member_ = false;
        inflateReset(&z_);
      }
    }
    in_.count_output(produced);
    return produced;
  }
  int64_t file_offset() const override { return in_.offset(); }

 private:
  CompressedInput in_;
  z_stream z_{};
  bool in_member_ = false, finished_ = false, pending_ = false;
};

class ZstdStream final : public ByteStream {
 public:
  ZstdStream(std::unique_ptr<FileBytes> file, const StreamLimits& limits)
      : in_(std::move(file), limits), dctx_(ZSTD_createDCtx()) {
    ZAYA_CHECK(dctx_ != nullptr, in_.file->path(), ": libzstd could not start a decoder");
  }
  ~ZstdStream() override { ZSTD_freeDCtx(dctx_); }
  ZstdStream(const ZstdStream&) = delete;
  ZstdStream& operator=(const ZstdStream&) = delete;

  size_t read(std::span<char> out) override {
    ZSTD_outBuffer o{out.data(), out.size(), 0};
    while (o.pos == 0) {
      // A frame may still hold buffered output with no input left: drain it before refilling.
      if (in_.pos == in_.size && !flushing_ && !in_.fill()) {
        ZAYA_CHECK(frame_done_, in_.file->path(), ": truncated zstd stream: the file ends at byte ",
                   in_.offset(), " inside a frame");
        break;
      }
      ZSTD_inBuffer i{in_.buffer.data(), in_.size, in_.pos};
      const size_t rc = ZSTD_decompressStream(dctx_, &o, &i);
      in_.pos = i.pos;
      ZAYA_CHECK(!ZSTD_isError(rc), in_.file->path(), ": damaged zstd stream near byte ",
                 in_.offset(), ": ", ZSTD_getErrorName(rc));
      frame_done_ = rc == 0;
      // Output full: the decoder may hold more for this frame even with no input left.
      flushing_ = o.pos == o.size && !frame_done_;
    }
    in_.count_output(o.pos);
    return o.pos;
  }
  int64_t file_offset() const override { return in_.offset(); }

 private:
  CompressedInput in_;
  ZSTD_DCtx* dctx_;
  bool frame_done_ = true, flushing_ = false;
};

}  // namespace

std::unique_ptr<ByteStream> make_gzip_stream(std::unique_ptr<FileBytes> file,
                                             const StreamLimits& limits) {
  return std::make_unique<GzipStream>(std::move(file), limits);
}

std::unique_ptr<ByteStream> make_zstd_stream(std::unique_ptr<FileBytes> file,
                                             const StreamLimits& limits) {
  return std::make_unique<ZstdStream>(std::move(file), limits);
}

}  // namespace zaya
