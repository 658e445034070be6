#include "io/input_files.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> directory_inputs(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    // Hidden files are editors' and tools' droppings (.DS_Store, .part downloads), never data.
    if (entry.is_regular_file() && !name.starts_with(".") && has_input_file_name(name))
      files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> glob_inputs(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  const std::unique_ptr<glob_t, decltype(&::globfree)> owned(&g, &::globfree);
  std::vector<std::string> files;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i)
      if (fs::is_regular_file(g.gl_pathv[i])) files.emplace_back(g.gl_pathv[i]);
  std::sort(files.begin(), files.end());  // glob sorts by locale; paths sort by bytes here
  return files;
}

// What a stat() mode says is there, for a message.
const char* file_type_phrase(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

void require_regular_file(const std::string& path, const char* flag) {
  const std::string who = flag ? str_cat(flag, " ", path) : path;
  struct stat st {};
  // stat, not open: opening a FIFO would block until something writes to it.
  ZAYA_CHECK(::stat(path.c_str(), &st) == 0, who, ": cannot read: ", std::strerror(errno));
  ZAYA_CHECK(S_ISREG(st.st_mode), who, ": ", file_type_phrase(st.st_mode),
             "; expected a regular file");
}

bool has_input_file_name(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  for (const char* c : {".gz", ".zst", ".zstd"})
    if (name.ends_with(c)) return true;
  static constexpr std::array<const char*, 6> kText = {".txt",   ".text", ".md",
                                                       ".jsonl", ".json", ".ndjson"};
  return std::any_of(kText.begin(), kText.end(), [&](const char* e) { return name.ends_with(e); });
}

std::vector<std::string> expand_input_paths(const std::vector<std::string>& args,
                                            const char* flag) {
  std::vector<std::string> files;
  for (const std::string& arg : args) {
    std::vector<std::string> found;
    if (fs::is_directory(arg)) {
      found = directory_inputs(arg);
      ZAYA_CHECK(!found.empty(), flag, " ", arg, ": the directory holds no input file (names ",
                 "ending in .txt, .md, .jsonl, .json, .ndjson, .gz, .zst)");
    } else if (fs::exists(arg)) {
      require_regular_file(arg, flag);
      found = {arg};
    } else if (arg.find_first_of("*?[") != std::string::npos) {
      found = glob_inputs(arg);
      ZAYA_CHECK(!found.empty(), flag, " ", arg, ": the pattern matches no file");
    } else {
      ZAYA_FAIL(flag, " ", arg, ": no such file or directory");
    }
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

}  // namespace zaya
