// Input streams: gzip and zstd round trips (one member/frame and several, sizes across the read
// chunk), damaged and truncated streams refused with the file and a byte offset, compression
// recognised by content and not by name.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <string>

#include "io/byte_stream.h"
#include "test_data_helpers.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

std::string gzip_bytes(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, uLong(text.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = uInt(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string zstd_bytes(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string read_all(const std::string& path) {
  auto s = open_byte_stream(path);
  std::string all, chunk(1000, '\0');  // a small buffer: many calls, partial outputs
  while (const size_t n = s->read(chunk)) all.append(chunk, 0, n);
  return all;
}

// Text that compresses poorly enough to span many input and output chunks.
std::string varied_text(size_t bytes) {
  std::string t;
  uint64_t x = 12345;
  while (t.size() < bytes) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t += "word" + std::to_string(x >> 40) + ((x >> 20) % 7 == 0 ? "\n" : " ");
  }
  return t;
}

TEST(IoCompressed, RoundTripsEveryFormatAtAnySize) {
  const fs::path dir = test::temp_dir("io_roundtrip");
  for (const size_t size : {size_t(0), size_t(1), size_t(5000), size_t(3) << 20}) {
    const std::string text = varied_text(size).substr(0, size);
    test::write_text(dir / "a.txt", text);
    test::write_text(dir / "a.gz", gzip_bytes(text));
    test::write_text(dir / "a.zst", zstd_bytes(text));
    EXPECT_EQ(read_all((dir / "a.txt").string()), text) << size;
    EXPECT_EQ(read_all((dir / "a.gz").string()), text) << size;
    EXPECT_EQ(read_all((dir / "a.zst").string()), text) << size;
  }
}

TEST(IoCompressed, ConcatenatedMembersAndFramesReadAsOne) {
  const fs::path dir = test::temp_dir("io_concat");
  const std::string a = varied_text(300000), b = "second part\n";
  test::write_text(dir / "m.gz", gzip_bytes(a) + gzip_bytes(b));
  test::write_text(dir / "m.zst", zstd_bytes(a) + zstd_bytes(b));
  EXPECT_EQ(read_all((dir / "m.gz").string()), a + b);
  EXPECT_EQ(read_all((dir / "m.zst").string()), a + b);
}

TEST(IoCompressed, CompressionIsRecognisedByContentNotName) {
  const fs::path dir = test::temp_dir("io_sniff");
  const std::string text = "hello\n";
  test::write_text(dir / "looks_plain.txt", zstd_bytes(text));
  test::write_text(dir / "noext", gzip_bytes(text));
  Compression c{};
  open_byte_stream((dir / "looks_plain.txt").string(), &c);
  EXPECT_EQ(c, Compression::kZstd);
  EXPECT_EQ(read_all((dir / "looks_plain.txt").string()), text);
  EXPECT_EQ(read_all((dir / "noext").string()), text);
}

TEST(IoCompressed, TruncatedStreamsNameTheFileAndOffset) {
  const fs::path dir = test::temp_dir("io_truncated");
  const std::string text = varied_text(200000);
  const std::string gz = gzip_bytes(text), zst = zstd_bytes(text);
  test::write_text(dir / "cut.gz", gz.substr(0, gz.size() / 2));
  test::write_text(dir / "cut.zst", zst.substr(0, zst.size() / 2));
  const std::string gz_error = test::error_of([&] { read_all((dir / "cut.gz").string()); });
  EXPECT_NE(gz_error.find("cut.gz: truncated gzip stream: the file ends at byte " +
                          std::to_string(gz.size() / 2)),
            std::string::npos)
      << gz_error;
  const std::string zst_error = test::error_of([&] { read_all((dir / "cut.zst").string()); });
  EXPECT_NE(zst_error.find("cut.zst: truncated zstd stream: the file ends at byte " +
                           std::to_string(zst.size() / 2)),
            std::string::npos)
      << zst_error;
  // The gzip trailer (CRC and length) missing is a truncation too, not a silent success.
  test::write_text(dir / "no_trailer.gz", gz.substr(0, gz.size() - 4));
  EXPECT_NE(test::error_of([&] { read_all((dir / "no_trailer.gz").string()); }).find("truncated"),
            std::string::npos);
}

TEST(IoCompressed, CorruptDataIsAnError) {
  const fs::path dir = test::temp_dir("io_corrupt");
  std::string gz = gzip_bytes(varied_text(100000));
  for (size_t i = 100; i < 200; ++i) gz[i] = char(gz[i] ^ 0x5a);
  test::write_text(dir / "bad.gz", gz);
  const std::string e = test::error_of([&] { read_all((dir / "bad.gz").string()); });
  EXPECT_NE(e.find("bad.gz: damaged gzip stream near byte"), std::string::npos) << e;
}

}  // namespace
}  // namespace zaya
