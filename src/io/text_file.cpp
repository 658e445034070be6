#include "io/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

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
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());  // a failed write leaves nothing behind
      ZAYA_FAIL("writing '", tmp, "' failed: ", std::strerror(err));
    }
    done += size_t(n);
  }
  const bool synced = !durable || ::fsync(fd) == 0;
  const int sync_err = errno;
  ::close(fd);
  if (!synced) ::unlink(tmp.c_str());
  ZAYA_CHECK(synced, "fsync of '", tmp, "' failed: ", std::strerror(sync_err));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    ZAYA_FAIL("renaming '", tmp, "' to '", path, "' failed: ", std::strerror(err));
  }
}

}  // namespace zaya
