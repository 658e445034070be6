#include "ckpt/ckpt_fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "data/checksum.h"

namespace zaya::ckpt_fs {

void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  ZAYA_CHECK(fd >= 0, "cannot open '", path, "' to fsync it");
  const int rc = ::fsync(fd);
  ::close(fd);
  ZAYA_CHECK(rc == 0, "fsync of '", path, "' failed");
}

void write_synced(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
    out.close();
    ZAYA_CHECK(out.good(), "writing '", path, "' failed");
  }
  sync_path(path);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ZAYA_CHECK(in.good(), "cannot read '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t file_checksum(const std::string& path, uint64_t* bytes) {
  std::ifstream in(path, std::ios::binary);
  ZAYA_CHECK(in.good(), "cannot read '", path, "'");
  std::vector<char> buf(1 << 20);
  uint64_t h = kFnv1a64Offset, n = 0;
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    const auto got = size_t(in.gcount());
    h = fnv1a64(buf.data(), got, h);
    n += got;
  }
  if (bytes) *bytes = n;
  return h;
}

}  // namespace zaya::ckpt_fs
