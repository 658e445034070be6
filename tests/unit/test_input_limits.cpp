// Bounds on what a reader holds, whatever the input (issue 39): a record longer than the limit
// refused while it is read, a decompression bomb refused past its ratio, special files refused
// before they are opened, and JSON nested 100,000 deep refused before it is built.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <string>

#include "eval/task_file.h"
#include "io/byte_stream.h"
#include "io/document_reader.h"
#include "io/input_files.h"
#include "io/json_file.h"
#include "io/json_limits.h"
#include "io/record_reader.h"
#include "model/config.h"
#include "serve/completion_request.h"
#include "test_data_helpers.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

bool limit_msg_has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// `bytes` zeros, compressed with level 1 (as `gzip -1`) in 1 MiB steps.
std::string limit_zeros_gzip(size_t bytes) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string zeros(size_t(1) << 20, '\0'), out, chunk(size_t(1) << 16, '\0');
  for (size_t left = bytes; left > 0 || z.avail_in > 0;) {
    const size_t n = std::min(left, zeros.size());
    left -= n;
    z.next_in = reinterpret_cast<Bytef*>(zeros.data());
    z.avail_in = uInt(n);
    const int flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    int rc = Z_OK;
    do {
      z.next_out = reinterpret_cast<Bytef*>(chunk.data());
      z.avail_out = uInt(chunk.size());
      rc = deflate(&z, flush);
      out.append(chunk, 0, chunk.size() - z.avail_out);
    } while (z.avail_out == 0);
    if (rc == Z_STREAM_END) break;
  }
  deflateEnd(&z);
  return out;
}

std::string limit_zeros_zstd(size_t bytes) {
  const std::string zeros(bytes, '\0');
  std::string out(ZSTD_compressBound(bytes), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), zeros.data(), zeros.size(), 1));
  return out;
}

// Reads the whole stream; returns the content bytes seen before the end or the error.
int64_t drain_stream(ByteStream& s) {
  std::string chunk(size_t(1) << 20, '\0');
  int64_t total = 0;
  while (const size_t n = s.read(chunk)) total += int64_t(n);
  return total;
}

TEST(InputLimits, LineLongerThanTheLimitIsRefusedWhileRead) {
  const fs::path dir = test::temp_dir("limits_line");
  const std::string path = (dir / "long.jsonl").string();
  // Line 2 is 8 MiB long: the reader must stop long before it holds all of it.
  test::write_text(path, "{\"text\": \"a\"}\n{\"text\": \"" + std::string(8 << 20, 'x') + "\"}\n");
  ReadOptions o;
  o.max_record_bytes = 1000;
  RecordReader reader(path, o);
  Record r;
  ASSERT_TRUE(reader.next(r));
  const std::string e = test::error_of([&] { reader.next(r); });
  EXPECT_TRUE(limit_msg_has(e, path + ":2: a line longer than the limit of 1000 bytes")) << e;
  EXPECT_TRUE(limit_msg_has(e, "--max-record-bytes")) << e;
  EXPECT_LE(reader.file_bytes(), int64_t(3) << 20);  // a chunk or two, not the 8 MiB line
}

TEST(InputLimits, LineAtTheLimitIsRead) {
  const fs::path dir = test::temp_dir("limits_at");
  const std::string path = (dir / "ok.jsonl").string();
  const std::string line = "{\"text\": \"" + std::string(100, 'y') + "\"}";
  test::write_text(path, line + "\n" + line);
  ReadOptions o;
  o.max_record_bytes = int64_t(line.size());
  RecordReader reader(path, o);
  Record r;
  ASSERT_TRUE(reader.next(r));
  ASSERT_TRUE(reader.next(r));
  EXPECT_EQ(r.bytes, line);
  EXPECT_FALSE(reader.next(r));
}

TEST(InputLimits, TextDocumentLongerThanTheLimitNamesItsLine) {
  const fs::path dir = test::temp_dir("limits_doc");
  const std::string path = (dir / "docs.txt").string();
  test::write_text(path, "short one\n\nline 3 starts a long one " + std::string(5000, 'z'));
  ReadOptions o;
  o.max_record_bytes = 4096;
  RecordReader reader(path, o);
  Record r;
  ASSERT_TRUE(reader.next(r));
  const std::string e = test::error_of([&] { reader.next(r); });
  EXPECT_TRUE(limit_msg_has(e, path + ":3: a document longer than the limit of 4096 bytes")) << e;
}

TEST(InputLimits, GzipBombRefusedPastTheRatio) {
  const fs::path dir = test::temp_dir("limits_gzip");
  const std::string path = (dir / "bomb.txt.gz").string();
  test::write_text(path, limit_zeros_gzip(size_t(64) << 20));  // 64 MiB of zeros in about 290 KB
  const auto s = open_byte_stream(path);
  int64_t seen = 0;
  const std::string e = test::error_of([&] { seen = drain_stream(*s); });
  EXPECT_TRUE(limit_msg_has(e, path + ": decompresses to")) << e;
  EXPECT_TRUE(limit_msg_has(e, "--max-decompression-ratio")) << e;
  EXPECT_EQ(seen, 0);  // it threw
  // Refused at the first check past the floor: the compressed bytes consumed are a few KB.
  EXPECT_LT(s->file_offset(), 1 << 20);
}

TEST(InputLimits, ZstdBombRefusedPastTheRatio) {
  const fs::path dir = test::temp_dir("limits_zstd");
  const std::string path = (dir / "bomb.zst").string();
  test::write_text(path, limit_zeros_zstd(size_t(64) << 20));
  const auto s = open_byte_stream(path);
  const std::string e = test::error_of([&] { drain_stream(*s); });
  EXPECT_TRUE(limit_msg_has(e, path + ": decompresses to")) << e;
  EXPECT_TRUE(limit_msg_has(e, "--max-decompression-ratio")) << e;
}

TEST(InputLimits, RatioLimitZeroReadsTheBombAndGenuineFilesPass) {
  const fs::path dir = test::temp_dir("limits_ratio_off");
  const std::string path = (dir / "zeros.gz").string();
  test::write_text(path, limit_zeros_gzip(size_t(32) << 20));
  EXPECT_EQ(drain_stream(*open_byte_stream(path, nullptr, StreamLimits{.max_ratio = 0})),
            int64_t(32) << 20);
  // Under the floor any ratio passes: 8 MiB of zeros is no bomb.
  test::write_text(path, limit_zeros_gzip(size_t(8) << 20));
  EXPECT_EQ(drain_stream(*open_byte_stream(path)), int64_t(8) << 20);
}

TEST(InputLimits, SpecialFilesRefusedBeforeOpening) {
  const std::string e = test::error_of([] { open_byte_stream("/dev/zero"); });
  EXPECT_TRUE(limit_msg_has(e, "/dev/zero: a character device; expected a regular file")) << e;
  const std::string in = test::error_of([] { expand_input_paths({"/dev/zero"}); });
  EXPECT_TRUE(limit_msg_has(in, "--input /dev/zero: a character device; expected a regular file"))
      << in;
  EXPECT_TRUE(limit_msg_has(test::error_of([] { RecordReader("/dev/zero", ReadOptions{}); }),
                            "expected a regular file"));
  // A FIFO: open() would block until a writer came; it must be refused at once.
  const fs::path dir = test::temp_dir("limits_fifo");
  const std::string fifo = (dir / "pipe.jsonl").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string f = test::error_of([&] { RecordReader(fifo, ReadOptions{}); });
  EXPECT_TRUE(limit_msg_has(f, fifo + ": a FIFO (named pipe); expected a regular file")) << f;
  const std::string d = test::error_of([&] { require_regular_file(dir.string(), "--prompts"); });
  EXPECT_TRUE(
      limit_msg_has(d, "--prompts " + dir.string() + ": a directory; expected a regular file"))
      << d;
  const std::string t = test::error_of([] { read_task_file("/dev/zero"); });
  EXPECT_TRUE(limit_msg_has(t, "--tasks /dev/zero: a character device")) << t;
}

std::string nested_json(int depth) {
  return std::string(size_t(depth), '[') + std::string(size_t(depth), ']');
}

TEST(InputLimits, JsonDepthFoundWithItsPosition) {
  EXPECT_FALSE(json_too_deep(nested_json(kMaxJsonDepth)));
  const auto at = json_too_deep("{\"a\":\n" + nested_json(100000));
  ASSERT_TRUE(at);
  EXPECT_EQ(at->line, 2);
  EXPECT_EQ(at->column, kMaxJsonDepth);  // the '{' on line 1 was the first level
  // Brackets inside strings, escaped quotes included, are text.
  EXPECT_FALSE(
      json_too_deep("[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]"));
  const std::string e = test::error_of([] { parse_json_checked(nested_json(100000), "x.json"); });
  EXPECT_TRUE(limit_msg_has(e, "x.json: JSON nested more than 512 levels deep (at column 513)"))
      << e;
}

TEST(InputLimits, DeeplyNestedInputsAreErrorsNotCrashes) {
  const fs::path dir = test::temp_dir("limits_nested");
  const std::string deep = nested_json(100000);
  // A task file: the SIGSEGV of zaya eval --tasks and of a training config's eval section.
  const std::string task = (dir / "task.jsonl").string();
  test::write_text(task, "{\"context\": \"c\", \"choices\": [\"a\"], \"gold\": 0}\n" + deep + "\n");
  const std::string te = test::error_of([&] { read_task_file(task); });
  EXPECT_TRUE(limit_msg_has(te, task + ":2: JSON nested more than 512 levels deep")) << te;
  // A data line: simdjson refuses it, and the nlohmann::json path must not build it.
  const std::string data = (dir / "data.jsonl").string();
  test::write_text(data, "{\"text\": " + deep + "}\n");
  Document doc;
  const std::string de = test::error_of([&] { DocumentReader(data, ReadOptions{}).next(doc); });
  EXPECT_TRUE(limit_msg_has(de, data + ":1: not a JSON line: nested more than 512")) << de;
  // A config and any JSON file read through read_json_file.
  const std::string config = (dir / "config.json").string();
  test::write_text(config, "{\"model\":\n" + deep + "}");
  const std::string ce = test::error_of([&] { read_config_file(config); });
  EXPECT_TRUE(limit_msg_has(ce, config + ": JSON nested more than 512 levels deep (at line 2"))
      << ce;
  const std::string je = test::error_of([&] { read_json_file(config, "tokens file"); });
  EXPECT_TRUE(limit_msg_has(je, "nested more than 512")) << je;
  // A request body of zaya serve: a 400, not a crash.
  try {
    serve::parse_completion_request("{\"prompt\": " + deep + "}", "m", 16, 100);
    ADD_FAILURE() << "no error for a body nested 100,000 deep";
  } catch (const serve::ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_TRUE(limit_msg_has(e.what(), "nested more than 512")) << e.what();
  }
}

}  // namespace
}  // namespace zaya
