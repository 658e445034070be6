// The one rule for what a command writes. A path a command writes is refused when something is
// already there that this invocation did not make (unless the command was given --force), and
// always when it is one of the command's inputs or holds one (compared by device and inode, so a
// symlink or a hard link is seen through). Once, `zaya plot --metrics M --out M` replaced a run's
// metrics with the SVG and `ckpt export-hf` replaced a run's final model with an older step's.
//
// What is allowed is written beside the target (PATH.tmp-PID, a file or a directory), fsynced and
// renamed over it, so a reader sees the old output or the new one, never half of one; a failure
// at any point removes the temporary (RAII), so nothing .tmp is left behind.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace zaya {

enum class OutputKind { kFile, kDirectory };

struct OutputRule {
  std::string flag;  // as the user spells it: "--out", "OUT_DIR"
  std::string path;
  OutputKind kind = OutputKind::kFile;
  bool force = false;               // --force: an existing output may be replaced
  std::vector<std::string> inputs;  // never written, --force or not
};

// Throws zaya::Error (naming the flag, the path and --force) when the rule refuses the path.
// An empty directory holds nothing to lose and is accepted as a directory output.
void check_output(const OutputRule& rule);

// Writes all n bytes to fd, retrying short writes; throws naming `path` on any error (ENOSPC,
// EFBIG, EIO), so /dev/full or a full disk never passes silently.
void write_fully(int fd, const void* data, size_t n, const std::string& path);

// A checked output under construction: the constructor applies check_output() and makes the
// temporary beside the target (an empty file, or an empty directory), which the command fills.
// commit() fsyncs it and renames it over the target; without commit() the destructor removes it.
class StagedOutput {
 public:
  explicit StagedOutput(OutputRule rule);
  ~StagedOutput();
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;

  // Where to write: the temporary file or directory.
  const std::string& path() const { return temp_; }
  const std::string& target() const { return rule_.path; }
  // Publishes path(), or (for a directory) `built`, a directory inside path() that holds the
  // output (a writer that makes its own subdirectory, as a checkpoint writer does).
  void commit();
  void commit(const std::string& built);

 private:
  OutputRule rule_;
  std::string temp_;
  bool done_ = false;
};

// Fills a file StagedOutput with text (every write and the close checked); commit() publishes it.
void write_staged_text(StagedOutput& out, const std::string& text);
// A whole file through the rule: check, write, fsync, rename.
void write_output_file(const OutputRule& rule, const std::string& text);

}  // namespace zaya
