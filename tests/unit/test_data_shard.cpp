// Token shards: round trips in both dtypes and every kind of damage named by file and field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "data/checksum.h"
#include "data/shard.h"
#include "test_data_helpers.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::temp_dir;

std::vector<int32_t> ramp(int64_t n, int64_t vocab) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = int32_t((i * 7919) % vocab);
  return v;
}

TEST(DataChecksum, Fnv1a64KnownValues) {
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
  EXPECT_EQ(fnv1a64("bar", 3, fnv1a64("foo", 3)), fnv1a64("foobar", 6));
}

// Expected values from the definition in checksum.h, evaluated by hand (Python) outside zaya.
TEST(DataChecksum, WordHashKnownValuesAndSplits) {
  const auto hash = [](std::string_view s) {
    WordHash h;
    h.add(s.data(), s.size());
    return h.value();
  };
  EXPECT_EQ(hash(""), 0x4300dbefd7b1dea6ull);
  EXPECT_EQ(hash("a"), 0x81abd622c6485043ull);
  EXPECT_EQ(hash("abcdefghij"), 0x4b9d2fb081b6b58bull);
  const std::string text = "a part's body, cut into add() calls anywhere: 0123456789abcdef";
  for (size_t cut = 0; cut <= text.size(); ++cut)
    for (size_t cut2 = cut; cut2 <= text.size(); cut2 += 5) {
      WordHash h;
      h.add(text.data(), cut);
      h.add(text.data() + cut, cut2 - cut);
      h.add(text.data() + cut2, text.size() - cut2);
      ASSERT_EQ(h.value(), hash(text)) << cut << " " << cut2;
    }
  EXPECT_NE(hash(std::string("ab\0", 3)), hash("ab"));  // trailing zeros count
  for (size_t i = 0; i < text.size(); ++i) {
    std::string flipped = text;
    flipped[i] = char(flipped[i] ^ 0x80);
    EXPECT_NE(hash(flipped), hash(text)) << i;
  }
}

TEST(DataShard, RoundTripU16AndU32) {
  const fs::path dir = temp_dir("shard_rt");
  for (int64_t vocab : {int64_t(257), int64_t(65536), int64_t(262272)}) {
    const auto tokens = ramp(1000, vocab);
    const std::string path = (dir / str_cat("s", vocab, ".bin")).string();
    const ShardInfo w = write_shard(path, tokens, vocab);
    EXPECT_EQ(w.dtype, vocab <= 65536 ? TokenDtype::kU16 : TokenDtype::kU32);
    EXPECT_EQ(fs::file_size(path), 64 + 1000 * size_t(w.dtype));
    EXPECT_FALSE(fs::exists(path + ".tmp"));
    ShardReader r(path);
    EXPECT_EQ(r.size(), 1000);
    EXPECT_EQ(r.info().vocab_size, vocab);
    EXPECT_EQ(r.info().checksum, w.checksum);
    std::vector<int32_t> back(1000);
    r.read(0, back);
    EXPECT_EQ(back, tokens);
    std::vector<int32_t> mid(10);
    r.read(500, mid);
    EXPECT_EQ(mid[0], tokens[500]);
  }
  // An empty shard is valid (a source may have no validation documents).
  write_shard((dir / "empty.bin").string(), {}, 257);
  EXPECT_EQ(ShardReader((dir / "empty.bin").string()).size(), 0);
}

TEST(DataShard, WriterRejectsIdsOutsideVocab) {
  const fs::path dir = temp_dir("shard_ids");
  const std::vector<int32_t> bad = {1, 2, 257};
  const std::string msg = error_of([&] { write_shard((dir / "x.bin").string(), bad, 257); });
  EXPECT_NE(msg.find("x.bin: token 2 has id 257"), std::string::npos) << msg;
}

// Streaming in pieces gives the very bytes of one write; an unfinished writer leaves no file.
TEST(DataShard, StreamingWriterMatchesOneWriteAndCleansUp) {
  const fs::path dir = temp_dir("shard_stream");
  const std::vector<int32_t> tokens = ramp(10000, 257);
  write_shard((dir / "whole.bin").string(), tokens, 257);
  {
    ShardFileWriter w((dir / "parts.bin").string(), 257);
    const std::span<const int32_t> all(tokens);
    w.append(all.first(3));
    w.append(all.subspan(3, 4000));
    w.append(all.subspan(4003));
    EXPECT_EQ(w.finish().tokens, 10000);
  }
  const auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes(dir / "parts.bin"), bytes(dir / "whole.bin"));
  {
    ShardFileWriter w((dir / "unfinished.bin").string(), 257);
    w.append(tokens);
    EXPECT_TRUE(fs::exists(dir / "unfinished.bin.tmp"));
  }
  EXPECT_FALSE(fs::exists(dir / "unfinished.bin.tmp"));
  EXPECT_FALSE(fs::exists(dir / "unfinished.bin"));
}

class DataShardDamage : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("shard_damage");
    path_ = (dir_ / "train-00000.bin").string();
    write_shard(path_, ramp(4096, 257), 257);
  }
  void patch(size_t offset, const std::vector<uint8_t>& bytes) {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(offset));
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  std::string open_error(bool verify = true) {
    return error_of([&] { ShardReader r(path_, verify); });
  }
  fs::path dir_;
  std::string path_;
};

TEST_F(DataShardDamage, Truncated) {
  fs::resize_file(path_, 64 + 4096 * 2 - 3);
  const std::string msg = open_error(false);
  EXPECT_NE(msg.find(str_cat(path_, ": field 'token_count'")), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  fs::resize_file(path_, 20);
  EXPECT_NE(open_error().find(str_cat(path_, ": field 'header' truncated")), std::string::npos);
}

TEST_F(DataShardDamage, FlippedTokenByteFailsChecksum) {
  patch(64 + 1001, {0x01});
  const std::string msg = open_error();
  EXPECT_NE(msg.find(str_cat(path_, ": field 'checksum'")), std::string::npos) << msg;
  EXPECT_NE(msg.find("damaged"), std::string::npos) << msg;
  // Skipping verification opens it (for speed on trusted data).
  EXPECT_EQ(open_error(/*verify=*/false), "");
}

TEST_F(DataShardDamage, WrongMagicVersionDtype) {
  patch(0, {'G', 'G', 'U', 'F'});
  EXPECT_NE(open_error().find(str_cat(path_, ": field 'magic'")), std::string::npos);
  patch(0, {'Z', 'A', 'Y', 'A'});
  patch(8, {9});
  EXPECT_NE(open_error().find(str_cat(path_, ": field 'version' is 9, expected 1")),
            std::string::npos);
  patch(8, {1});
  patch(12, {3});
  EXPECT_NE(open_error().find(str_cat(path_, ": field 'dtype' is 3")), std::string::npos);
  patch(12, {2});
  EXPECT_EQ(open_error(), "");
}

}  // namespace
}  // namespace zaya
