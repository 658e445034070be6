// Token shards (docs/data-format.md): the 64-byte ZAYATOK1 header and the body it describes.
// Random bytes almost never carry a matching FNV-1a checksum, so each input is also read with the
// checksum written in, which lets the per-token id check and read() run on fuzzed bodies.
#include <cstring>
#include <vector>

#include "data/checksum.h"
#include "data/shard.h"
#include "fuzz_util.h"

namespace {

void read_shard(const std::string& path, bool verify) {
  ZAYA_FUZZ_EXPECT_ERRORS({
    const zaya::ShardReader r(path, verify);
    const int64_t n = r.size();
    std::vector<int32_t> out(size_t(std::min<int64_t>(n, 4096)));
    r.read(0, out);
    if (n > 0) r.at(n - 1);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::write_input("x.tok", data, size);
  read_shard(path, false);
  read_shard(path, true);
  constexpr size_t kOffChecksum = 32;  // see docs/data-format.md
  if (size >= zaya::kShardHeaderBytes) {
    std::vector<uint8_t> fixed(data, data + size);
    const uint64_t sum =
        zaya::fnv1a64(fixed.data() + zaya::kShardHeaderBytes, size - zaya::kShardHeaderBytes);
    std::memcpy(fixed.data() + kOffChecksum, &sum, 8);
    read_shard(zaya::fuzz::write_input("x.tok", fixed.data(), fixed.size()), true);
  }
  return 0;
}
