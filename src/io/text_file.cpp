#include "io/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/output_path.h"

namespace zaya {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ZAYA_CHECK(in.good(), "cannot read '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file_atomically(const std::string& path, const std::string& text, bool durable) {
  const std::string tmp = path + ".tmp";
  // POSIX calls rather than streams: one write, an optional fsync, and errno for the message.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZAYA_CHECK(fd >= 0, "cannot create '", tmp, "': ", std::strerror(errno));
  try {
    write_fully(fd, text.data(), text.size(), tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());  // a failed write leaves nothing behind
    throw;
  }
  const bool synced = !durable || ::fsync(fd) == 0;
  const int sync_err = errno;
  const bool closed = ::close(fd) == 0;
  const int close_err = errno;
  if (!synced || !closed) ::unlink(tmp.c_str());
  ZAYA_CHECK(synced, "fsync of '", tmp, "' failed: ", std::strerror(sync_err));
  ZAYA_CHECK(closed, "closing '", tmp, "' failed: ", std::strerror(close_err));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    ZAYA_FAIL("renaming '", tmp, "' to '", path, "' failed: ", std::strerror(err));
  }
}

}  // namespace zaya
