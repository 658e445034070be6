// Streaming gzip (zlib's inflate) and zstd (libzstd's ZSTD_decompressStream) readers behind
// ByteStream. Both accept concatenated members/frames, as pigz, bgzip and zstd -r write them, and
// both refuse a stream that ends before its last member or frame is complete.
#pragma once

#include <memory>

#include "io/byte_stream.h"

namespace zaya {

std::unique_ptr<ByteStream> make_gzip_stream(std::unique_ptr<FileBytes> file);
std::unique_ptr<ByteStream> make_zstd_stream(std::unique_ptr<FileBytes> file);

}  // namespace zaya
