// Streaming gzip (zlib's inflate) and zstd (libzstd's ZSTD_decompressStream) readers behind
// ByteStream. Both accept concatenated members/frames, as pigz, bgzip and zstd -r write them, and
// both refuse a stream that ends before its last member or frame is complete, and one that expands
// like a decompression bomb.
#pragma once

#include <memory>

#include "io/byte_stream.h"

namespace zaya {

// Both refuse to expand past limits.max_ratio times the compressed bytes read (see StreamLimits).
std::unique_ptr<ByteStream> make_gzip_stream(std::unique_ptr<FileBytes> file,
                                             const StreamLimits& limits = {});
std::unique_ptr<ByteStream> make_zstd_stream(std::unique_ptr<FileBytes> file,
                                             const StreamLimits& limits = {});

}  // namespace zaya
