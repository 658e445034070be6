#include "io/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/error.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

bool same_inode(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// True when `input` is the output, or (for a directory output) lies anywhere inside it: the
// input's resolved path is walked up to the root, each ancestor compared by inode.
bool touches_input(const struct stat& out, const std::string& input, bool directory) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(input, ec);
  if (ec) p = fs::absolute(input, ec);
  for (;;) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && same_inode(st, out)) return true;
    if (!directory || p.empty() || p == p.parent_path()) break;
    p = p.parent_path();
  }
  return false;
}

bool empty_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_empty(path, ec) && !ec;
}

std::string unique_temp_name(const std::string& path, const char* tag) {
  static std::atomic<unsigned> counter{0};
  return path + tag + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// fsync of one path (a file or a directory), checked.
void sync_one(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZAYA_CHECK(fd >= 0, "cannot open '", path, "' to sync it: ", std::strerror(errno));
  const bool ok = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  ZAYA_CHECK(ok, "fsync of '", path, "' failed: ", std::strerror(err));
}

void sync_tree(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() || e.is_directory()) sync_one(e.path().string());
  sync_one(dir);
}

std::string parent_of(const std::string& path) {
  const fs::path parent = fs::absolute(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

void check_output(const OutputRule& r) {
  const bool directory = r.kind == OutputKind::kDirectory;
  ZAYA_CHECK(!r.path.empty(), r.flag, ": needs a path to write");
  struct stat link {};
  if (::lstat(r.path.c_str(), &link) != 0) return;  // nothing there: ours to make
  struct stat st {};
  const bool resolves = ::stat(r.path.c_str(), &st) == 0;
  for (const std::string& in : r.inputs)
    ZAYA_CHECK(!resolves || !touches_input(st, in, directory), r.flag, ": '", r.path,
               directory ? "' is or holds " : "' is ", "the input '", in,
               "' of this command; nothing was changed (--force never replaces an input). "
               "Choose another path");
  ZAYA_CHECK(resolves && (directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)), r.flag, ": '",
             r.path, "' exists and is not a ", directory ? "directory" : "regular file",
             "; nothing was written (--force replaces only a ",
             directory ? "directory" : "regular file", "). Choose another path");
  if (directory && empty_directory(r.path)) return;
  ZAYA_CHECK(r.force, r.flag, ": '", r.path,
             "' already exists and this command did not make it; nothing was changed. Pass "
             "--force to replace it, or choose another path");
}

void write_fully(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    const ssize_t k = ::write(fd, p + done, n - done);
    if (k < 0 && errno == EINTR) continue;
    ZAYA_CHECK(k > 0, "writing '", path,
               "' failed: ", k < 0 ? std::strerror(errno) : "no progress (device full?)");
    done += size_t(k);
  }
}

StagedOutput::StagedOutput(OutputRule rule) : rule_(std::move(rule)) {
  check_output(rule_);
  std::error_code ec;
  fs::create_directories(parent_of(rule_.path), ec);
  temp_ = unique_temp_name(rule_.path, ".tmp-");
  if (rule_.kind == OutputKind::kDirectory) {
    ZAYA_CHECK(::mkdir(temp_.c_str(), 0755) == 0, rule_.flag, ": cannot create '", temp_,
               "' beside '", rule_.path, "': ", std::strerror(errno));
    return;
  }
  const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  ZAYA_CHECK(fd >= 0, rule_.flag, ": cannot create '", temp_, "' beside '", rule_.path,
             "': ", std::strerror(errno));
  ::close(fd);
}

StagedOutput::~StagedOutput() {
  if (done_) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);  // a failed or abandoned write leaves nothing behind
}

void StagedOutput::commit() {
  commit(temp_);
}

void StagedOutput::commit(const std::string& built) {
  ZAYA_CHECK(!done_, "StagedOutput: '", rule_.path, "' committed twice");
  const bool directory = rule_.kind == OutputKind::kDirectory;
  if (directory)
    sync_tree(built);
  else
    sync_one(built);
  // Checked again: the target may have appeared since the constructor looked.
  check_output(rule_);
  std::string old;
  if (directory && fs::exists(rule_.path) && !empty_directory(rule_.path)) {
    // rename(2) replaces only an empty directory: the old one goes aside first, back on failure.
    old = unique_temp_name(rule_.path, ".old.tmp-");
    ZAYA_CHECK(::rename(rule_.path.c_str(), old.c_str()) == 0, "cannot move '", rule_.path,
               "' aside to replace it: ", std::strerror(errno));
  }
  if (::rename(built.c_str(), rule_.path.c_str()) != 0) {
    const int err = errno;
    if (!old.empty()) ::rename(old.c_str(), rule_.path.c_str());
    ZAYA_FAIL("renaming '", built, "' to '", rule_.path, "' failed: ", std::strerror(err));
  }
  std::error_code ec;
  if (!old.empty()) fs::remove_all(old, ec);
  if (built != temp_) fs::remove_all(temp_, ec);
  done_ = true;
  sync_one(parent_of(rule_.path));
}

void write_staged_text(StagedOutput& out, const std::string& text) {
  const int fd = ::open(out.path().c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ZAYA_CHECK(fd >= 0, "cannot open '", out.path(), "': ", std::strerror(errno));
  try {
    write_fully(fd, text.data(), text.size(), out.target());
  } catch (...) {
    ::close(fd);
    throw;
  }
  ZAYA_CHECK(::close(fd) == 0, "closing '", out.target(), "' failed: ", std::strerror(errno));
}

void write_output_file(const OutputRule& rule, const std::string& text) {
  StagedOutput out(rule);
  write_staged_text(out, text);
  out.commit();
}

}  // namespace zaya
