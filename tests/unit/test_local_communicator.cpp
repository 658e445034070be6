// The one-process communicator and the pieces of `zaya bench comm` that need no MPI.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "bench/comm_bench.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/dist_context.h"
#include "dist/local_communicator.h"
#include "dist/reduce.h"

namespace zaya::dist {
namespace {

TEST(LocalCommunicator, CollectivesCopyOutOfPlaceAndInPlace) {
  LocalCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.world_size(), 1);
  const std::vector<float> in = {1.5f, -2, 3};
  std::vector<float> out(3, 0);
  c.all_reduce(in.data(), out.data(), 3, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(out, in);
  std::vector<float> io = in;
  c.all_reduce(io.data(), io.data(), 3, DType::F32, ReduceOp::Max);
  EXPECT_EQ(io, in);
  out.assign(3, 0);
  c.reduce_scatter(in.data(), out.data(), 3, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(out, in);
  out.assign(3, 0);
  c.all_gather(in.data(), out.data(), 3, DType::F32);
  EXPECT_EQ(out, in);
  out.assign(3, 0);
  c.broadcast(in.data(), out.data(), 3, DType::F32, 0);
  EXPECT_EQ(out, in);
  c.barrier();
}

TEST(LocalCommunicator, SendToSelfIsBufferedByTag) {
  LocalCommunicator c;
  const std::vector<int32_t> a = {1, 2}, b = {7};
  c.send(a.data(), 2, DType::I32, 0, 5);
  c.send(b.data(), 1, DType::I32, 0, 9);
  std::vector<int32_t> got(1);
  c.recv(got.data(), 1, DType::I32, 0, 9);
  EXPECT_EQ(got, b);
  got.resize(2);
  c.recv(got.data(), 2, DType::I32, 0, 5);
  EXPECT_EQ(got, a);
  EXPECT_THROW(c.recv(got.data(), 2, DType::I32, 0, 5), Error);  // nothing left: would block
}

TEST(LocalCommunicator, BadPeerNamesItself) {
  LocalCommunicator c;
  float x = 0;
  try {
    c.send(&x, 1, DType::F32, 1, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("peer 1 does not exist"), std::string::npos) << e.what();
  }
  EXPECT_THROW(c.broadcast(&x, &x, 1, DType::F32, 2), Error);
}

TEST(Reduce, OpsAndDtypes) {
  std::vector<float> d = {1, 5, -3};
  const std::vector<float> s = {2, 4, -4};
  reduce_into(d.data(), s.data(), 3, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(d, (std::vector<float>{3, 9, -7}));
  reduce_into(d.data(), s.data(), 3, DType::F32, ReduceOp::Max);
  EXPECT_EQ(d, (std::vector<float>{3, 9, -4}));
  reduce_into(d.data(), s.data(), 3, DType::F32, ReduceOp::Min);
  EXPECT_EQ(d, (std::vector<float>{2, 4, -4}));
  std::vector<int32_t> i = {INT32_MAX};
  const std::vector<int32_t> one = {1};
  reduce_into(i.data(), one.data(), 1, DType::I32, ReduceOp::Sum);
  EXPECT_EQ(i[0], INT32_MIN);  // wraps, as NCCL does, instead of undefined behaviour
  std::vector<uint16_t> h = {f32_to_bf16(1.5f)};
  const std::vector<uint16_t> h2 = {f32_to_bf16(2.25f)};
  reduce_into(h.data(), h2.data(), 1, DType::BF16, ReduceOp::Sum);
  EXPECT_EQ(bf16_to_f32(h[0]), 3.75f);
}

TEST(MakeCommunicator, LocalWithoutLauncher) {
  // ctest does not run this binary under mpirun.
  if (detect_launch().launched) GTEST_SKIP() << "running under a launcher";
  auto c = make_communicator();
  EXPECT_EQ(c->kind(), "local");
  EXPECT_EQ(c->world_size(), 1);
  EXPECT_EQ(rank_tag(), "");
}

// The local rank from each launcher's variable; 0 with none, or with a value that is not a rank.
TEST(LocalRank, FromTheLaunchersEnvironment) {
  const char* vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* v : vars)
    if (const char* s = std::getenv(v)) saved.emplace_back(v, s);
  for (const char* v : vars) unsetenv(v);
  EXPECT_EQ(local_rank(), 0);
  setenv("SLURM_LOCALID", "2", 1);
  EXPECT_EQ(local_rank(), 2);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);
  EXPECT_EQ(local_rank(), 5) << "Open MPI's variable comes first";
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x7", 1);
  EXPECT_EQ(local_rank(), 2) << "a value that is not a rank is skipped";
  for (const char* v : vars) unsetenv(v);
  for (const auto& [name, value] : saved) setenv(name.c_str(), value.c_str(), 1);
}

TEST(CommBench, ParsesSizesAndTypes) {
  EXPECT_EQ(parse_byte_size("8", "-b"), 8u);
  EXPECT_EQ(parse_byte_size("64K", "-b"), 64u << 10);
  EXPECT_EQ(parse_byte_size("64m", "-e"), 64u << 20);
  EXPECT_EQ(parse_byte_size("1G", "-e"), 1u << 30);
  EXPECT_THROW(parse_byte_size("12X", "-e"), Error);
  EXPECT_THROW(parse_byte_size("", "-e"), Error);
  EXPECT_THROW(parse_byte_size("1KB", "-e"), Error);
  EXPECT_EQ(parse_comm_dtype("bf16"), DType::BF16);
  EXPECT_THROW(parse_comm_dtype("double"), Error);
}

TEST(CommBench, LocalRunHasNoWrongValues) {
  LocalCommunicator c;
  for (const DType t : {DType::F32, DType::BF16, DType::I32}) {
    CommBenchOptions opt;
    opt.min_bytes = 8;
    opt.max_bytes = 4096;
    opt.iters = 2;
    opt.warmup = 1;
    opt.dtype = t;
    std::FILE* out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(run_comm_bench(c, opt, out), 0);
    std::rewind(out);
    std::string text;
    char buf[512];
    while (std::fgets(buf, sizeof(buf), out)) text += buf;
    std::fclose(out);
    EXPECT_NE(text.find("# Collective: reduce_scatter"), std::string::npos);
    EXPECT_NE(text.find("# Out of bounds values : 0 OK"), std::string::npos) << text;
    EXPECT_NE(text.find("# Avg bus bandwidth    : "), std::string::npos);
  }
}

}  // namespace
}  // namespace zaya::dist
