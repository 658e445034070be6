// The output rule (io/output_path.h): what exists is not replaced without --force, an input never,
// a replacement is a rename, every write is checked and no temporary outlives a failure.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/output_path.h"
#include "test_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::temp_dir;

void op_put(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::string op_read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The names in a directory, sorted, one per line: what a failure may have left behind.
std::string op_listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += n + "\n";
  return out;
}

bool op_has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(OutputPath, ExistingFileItDidNotMakeIsRefused) {
  const fs::path dir = temp_dir("out_existing");
  const fs::path f = dir / "metrics.jsonl";
  op_put(f, "keep\n");
  const std::string e = error_of([&] {
    write_output_file({"--out", f.string(), OutputKind::kFile, false, {}}, "new\n");
  });
  EXPECT_TRUE(op_has(e, "--out")) << e;
  EXPECT_TRUE(op_has(e, "'" + f.string() + "'")) << e;
  EXPECT_TRUE(op_has(e, "--force")) << e;
  EXPECT_EQ(op_read(f), "keep\n");
  EXPECT_EQ(op_listing(dir), "metrics.jsonl\n");
}

TEST(OutputPath, NewFileIsWritten) {
  const fs::path dir = temp_dir("out_new");
  const fs::path f = dir / "sub" / "plot.svg";
  write_output_file({"--out", f.string(), OutputKind::kFile, false, {}}, "<svg/>\n");
  EXPECT_EQ(op_read(f), "<svg/>\n");
  EXPECT_EQ(op_listing(dir / "sub"), "plot.svg\n");
}

TEST(OutputPath, ForceReplacesByRename) {
  const fs::path dir = temp_dir("out_force");
  const fs::path f = dir / "out.json", old_link = dir / "old-link";
  op_put(f, "old\n");
  fs::create_hard_link(f, old_link);  // the old inode: a rename leaves it whole
  StagedOutput out({"--out", f.string(), OutputKind::kFile, true, {}});
  op_put(out.path(), "new\n");
  EXPECT_EQ(op_read(f), "old\n");  // nothing is visible before the commit
  out.commit();
  EXPECT_EQ(op_read(f), "new\n");
  EXPECT_EQ(op_read(old_link), "old\n");
  EXPECT_EQ(op_listing(dir), "old-link\nout.json\n");
}

TEST(OutputPath, AnInputIsRefusedThroughSymlinkAndHardLinkEvenWithForce) {
  const fs::path dir = temp_dir("out_input");
  const fs::path in = dir / "metrics.jsonl", sym = dir / "sym.svg", hard = dir / "hard.svg";
  op_put(in, "{\"step\": 1}\n");
  fs::create_symlink(in, sym);
  fs::create_hard_link(in, hard);
  for (const fs::path& out : {in, sym, hard}) {
    const std::string e = error_of([&] {
      write_output_file({"--out", out.string(), OutputKind::kFile, true, {in.string()}}, "svg");
    });
    EXPECT_TRUE(op_has(e, "--out: '" + out.string() + "'")) << e;
    EXPECT_TRUE(op_has(e, "input")) << e;
    EXPECT_TRUE(op_has(e, "--force")) << e;
  }
  EXPECT_EQ(op_read(in), "{\"step\": 1}\n");
  EXPECT_EQ(op_listing(dir), "hard.svg\nmetrics.jsonl\nsym.svg\n");
}

TEST(OutputPath, ADirectoryHoldingAnInputIsRefusedEvenWithForce) {
  const fs::path dir = temp_dir("out_holds_input");
  const fs::path run = dir / "run", in = run / "ckpt" / "step-00000005";
  fs::create_directories(in);
  op_put(in / "manifest.json", "{}");
  const std::string e = error_of([&] {
    StagedOutput out({"OUT_DIR", run.string(), OutputKind::kDirectory, true, {in.string()}});
  });
  EXPECT_TRUE(op_has(e, "OUT_DIR: '" + run.string() + "' is or holds the input")) << e;
  EXPECT_EQ(op_read(in / "manifest.json"), "{}");
  EXPECT_EQ(op_listing(dir), "run\n");
}

TEST(OutputPath, ADirectoryIsReplacedWholeOnlyWithForce) {
  const fs::path dir = temp_dir("out_dir");
  const fs::path model = dir / "model";
  fs::create_directories(model);
  op_put(model / "model.safetensors", "old");
  const std::string e = error_of([&] {
    StagedOutput out({"OUT_DIR", model.string(), OutputKind::kDirectory, false, {}});
  });
  EXPECT_TRUE(op_has(e, "OUT_DIR: '" + model.string() + "' already exists")) << e;
  EXPECT_TRUE(op_has(e, "--force")) << e;
  EXPECT_EQ(op_listing(dir), "model\n");
  {
    StagedOutput out({"OUT_DIR", model.string(), OutputKind::kDirectory, true, {}});
    op_put(fs::path(out.path()) / "config.json", "new");
    EXPECT_EQ(op_listing(model), "model.safetensors\n");
    out.commit();
  }
  EXPECT_EQ(op_listing(model), "config.json\n");
  EXPECT_EQ(op_listing(dir), "model\n");  // neither the temporary nor the old one is left
}

TEST(OutputPath, AnEmptyDirectoryIsAcceptedWithoutForce) {
  const fs::path dir = temp_dir("out_empty_dir");
  const fs::path out_dir = dir / "out";
  fs::create_directories(out_dir);
  StagedOutput out({"--out", out_dir.string(), OutputKind::kDirectory, false, {}});
  op_put(fs::path(out.path()) / "outputs.safetensors", "x");
  out.commit();
  EXPECT_EQ(op_listing(out_dir), "outputs.safetensors\n");
  EXPECT_EQ(op_listing(dir), "out\n");
}

TEST(OutputPath, AnAbandonedOutputLeavesNothing) {
  const fs::path dir = temp_dir("out_abandoned");
  {
    StagedOutput f({"--out", (dir / "a.svg").string(), OutputKind::kFile, false, {}});
    StagedOutput d({"--out", (dir / "model").string(), OutputKind::kDirectory, false, {}});
    op_put(f.path(), "half");
    op_put(fs::path(d.path()) / "model.safetensors", "half");
    EXPECT_NE(op_listing(dir), "");
  }
  EXPECT_EQ(op_listing(dir), "");
}

TEST(OutputPath, AWriteToDevFullFailsNamingThePath) {
  ASSERT_TRUE(fs::exists("/dev/full")) << "this test needs Linux's /dev/full";
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::string data(4096, 'x');
  const std::string e = error_of([&] { write_fully(fd, data.data(), data.size(), "/dev/full"); });
  ::close(fd);
  EXPECT_TRUE(op_has(e, "writing '/dev/full' failed")) << e;
}

TEST(OutputPath, ANonRegularOutputIsRefusedEvenWithForce) {
  const std::string e = error_of([] {
    write_output_file({"--log-samples", "/dev/full", OutputKind::kFile, true, {}}, "x\n");
  });
  EXPECT_TRUE(op_has(e, "--log-samples: '/dev/full' exists and is not a regular file")) << e;
}

// /proc/version passes for a regular file, but nothing can be made beside it: a loud failure.
TEST(OutputPath, AnOutputWhereNothingCanBeMadeFailsLoudly) {
  EXPECT_TRUE(
      op_has(error_of([] {
               write_output_file({"--out", "/proc/version", OutputKind::kFile, false, {}}, "x\n");
             }),
             "--out: '/proc/version' already exists"));
  const std::string e = error_of([] {
    write_output_file({"--out", "/proc/version", OutputKind::kFile, true, {}}, "x\n");
  });
  EXPECT_TRUE(op_has(e, "--out: cannot create '/proc/version.tmp-")) << e;
}

// A disk that fills mid-write, made small with RLIMIT_FSIZE (writes past it fail with EFBIG).
TEST(OutputPath, AFailedWriteLeavesNoTemporaryAndNoTarget) {
  const fs::path dir = temp_dir("out_full_disk");
  const fs::path f = dir / "samples.jsonl";
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string e = error_of([&] {
    write_output_file({"--out", f.string(), OutputKind::kFile, false, {}}, std::string(5000, 'x'));
  });
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(op_has(e, "writing '" + f.string() + "' failed")) << e;
  EXPECT_EQ(op_listing(dir), "");
}

}  // namespace
}  // namespace zaya
