// The MPI communicator, run under mpirun with 2 and 3 ranks (tests/comm/CMakeLists.txt). Every
// collective is checked against values each rank computes on its own, in and out of place, with
// counts that do not divide by the world size, for every dtype; sums must equal the rank-order
// sum bit for bit and stay identical over repeated calls.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/blas_startup.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/dist_context.h"
#include "dist/mpi_communicator.h"
#include "dist/reduce.h"
#include "mpi_test_env.h"

namespace zaya::dist {
namespace {}  // namespace
Communicator* g_comm = nullptr;
namespace {

// Non-integer values whose float sum depends on the order of additions, so a reduction in any
// other order than 0..N-1 shows up as a bitwise difference.
double value(int rank, size_t i) {
  return std::sin(double(rank) * 1000.5 + double(i)) * 1e3;
}

std::vector<unsigned char> make(DType t, size_t count, int rank, size_t offset = 0) {
  std::vector<unsigned char> b(count * dtype_size(t));
  for (size_t i = 0; i < count; ++i) {
    const double v = value(rank, offset + i);
    if (t == DType::F32) {
      const float f = float(v);
      std::memcpy(&b[i * 4], &f, 4);
    } else if (t == DType::I32) {
      const int32_t x = int32_t(v);
      std::memcpy(&b[i * 4], &x, 4);
    } else {
      const uint16_t h = f32_to_bf16(float(v));
      std::memcpy(&b[i * 2], &h, 2);
    }
  }
  return b;
}

// bf16 <-> float written here, independently of core/tensor's: round to nearest, ties to even
// (the inputs are finite).
float test_bf16_to_f32(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t test_f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

template <typename T>
T combine_plain(T a, T b, ReduceOp op) {
  if (op == ReduceOp::Sum) return a + b;
  if (op == ReduceOp::Max) return a < b ? b : a;
  return b < a ? b : a;
}

// The reference, computed here and not by the code under test (dist/reduce): contributions
// combined in rank order 0, 1, ..., N-1 with plain arithmetic; bf16 partial results rounded back
// to bf16 after each step (the wire format carries bf16); int32 sums wrap.
std::vector<unsigned char> expected_reduce(DType t, size_t count, ReduceOp op, size_t offset) {
  std::vector<std::vector<unsigned char>> parts;
  for (int r = 0; r < g_comm->world_size(); ++r) parts.push_back(make(t, count, r, offset));
  std::vector<unsigned char> out(count * dtype_size(t));
  for (size_t i = 0; i < count; ++i) {
    if (t == DType::F32) {
      float acc, x;
      std::memcpy(&acc, &parts[0][i * 4], 4);
      for (size_t r = 1; r < parts.size(); ++r) {
        std::memcpy(&x, &parts[r][i * 4], 4);
        acc = combine_plain(acc, x, op);
      }
      std::memcpy(&out[i * 4], &acc, 4);
    } else if (t == DType::I32) {
      int32_t acc, x;
      std::memcpy(&acc, &parts[0][i * 4], 4);
      for (size_t r = 1; r < parts.size(); ++r) {
        std::memcpy(&x, &parts[r][i * 4], 4);
        acc =
            op == ReduceOp::Sum ? int32_t(uint32_t(acc) + uint32_t(x)) : combine_plain(acc, x, op);
      }
      std::memcpy(&out[i * 4], &acc, 4);
    } else {
      uint16_t acc, x;
      std::memcpy(&acc, &parts[0][i * 2], 2);
      for (size_t r = 1; r < parts.size(); ++r) {
        std::memcpy(&x, &parts[r][i * 2], 2);
        acc = test_f32_to_bf16(combine_plain(test_bf16_to_f32(acc), test_bf16_to_f32(x), op));
      }
      std::memcpy(&out[i * 2], &acc, 2);
    }
  }
  return out;
}

// The rank-order promise on literal numbers. Rank 0 contributes 1e8, every other rank 3. In fp32
// (ulp 8 at 1e8) the rank-order sum ((1e8 + 3) + 3) + ... rounds back to 1e8 at every step, while
// at 3 ranks or more any order that adds two 3s first gives 1e8 + 8.
TEST(Mpi, SumIsInRankOrderOnLiteralValues) {
  const float mine = g_comm->rank() == 0 ? 1e8f : 3.0f;
  float sum = 0.0f;
  g_comm->all_reduce(&mine, &sum, 1, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(sum, 1e8f);
  const int32_t one = g_comm->rank() + 1;
  int32_t total = 0;
  g_comm->all_reduce(&one, &total, 1, DType::I32, ReduceOp::Sum);
  const int w = g_comm->world_size();
  EXPECT_EQ(total, w * (w + 1) / 2);
}

const DType kTypes[] = {DType::F32, DType::BF16, DType::I32};
const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min};
const size_t kCounts[] = {0, 1, 2, 3, 7, 1000, 1001, 100003};

TEST(Mpi, RankAndWorldMatchTheLauncher) {
  const LaunchInfo l = detect_launch();
  ASSERT_TRUE(l.launched);
  EXPECT_EQ(g_comm->kind(), "mpi");
  EXPECT_EQ(g_comm->rank(), l.rank);
  EXPECT_EQ(g_comm->world_size(), l.world_size);
  EXPECT_GE(g_comm->world_size(), 2);
  EXPECT_EQ(rank_tag(),
            "[rank " + std::to_string(l.rank) + "/" + std::to_string(l.world_size) + "] ");
}

TEST(Mpi, AllReduceInAndOutOfPlace) {
  const int r = g_comm->rank();
  for (const DType t : kTypes)
    for (const ReduceOp op : kOps)
      for (const size_t n : kCounts) {
        const auto want = expected_reduce(t, n, op, 0);
        const auto in = make(t, n, r);
        std::vector<unsigned char> out(in.size(), 0xAB);
        g_comm->all_reduce(in.data(), out.data(), n, t, op);
        EXPECT_EQ(out, want) << dtype_name(t) << " " << reduce_op_name(op) << " count " << n;
        EXPECT_EQ(in, make(t, n, r)) << "input modified";
        auto io = make(t, n, r);
        g_comm->all_reduce(io.data(), io.data(), n, t, op);
        EXPECT_EQ(io, want) << "in-place " << dtype_name(t) << " " << reduce_op_name(op)
                            << " count " << n;
      }
}

TEST(Mpi, AllReduceSumIsBitwiseReproducible) {
  const size_t n = 100003;
  const auto in = make(DType::F32, n, g_comm->rank());
  std::vector<unsigned char> first(in.size());
  g_comm->all_reduce(in.data(), first.data(), n, DType::F32, ReduceOp::Sum);
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<unsigned char> again(in.size());
    g_comm->all_reduce(in.data(), again.data(), n, DType::F32, ReduceOp::Sum);
    ASSERT_EQ(again, first) << "repetition " << rep;
  }
  // Every rank holds the same bits.
  std::vector<unsigned char> all(first.size() * size_t(g_comm->world_size()));
  g_comm->all_gather(first.data(), all.data(), n, DType::F32);
  for (int j = 0; j < g_comm->world_size(); ++j)
    EXPECT_EQ(0, std::memcmp(&all[j * first.size()], first.data(), first.size())) << "rank " << j;
}

TEST(Mpi, ReduceScatterInAndOutOfPlace) {
  const int r = g_comm->rank(), w = g_comm->world_size();
  for (const DType t : kTypes)
    for (const ReduceOp op : kOps)
      for (const size_t per : {size_t(1), size_t(5), size_t(333), size_t(40000)}) {
        const size_t es = dtype_size(t);
        const auto full = expected_reduce(t, per * w, op, 0);
        const std::vector<unsigned char> want(full.begin() + r * per * es,
                                              full.begin() + (r + 1) * per * es);
        const auto in = make(t, per * w, r);
        std::vector<unsigned char> out(per * es, 0xAB);
        g_comm->reduce_scatter(in.data(), out.data(), per, t, op);
        EXPECT_EQ(out, want) << dtype_name(t) << " " << reduce_op_name(op) << " per " << per;
        auto io = make(t, per * w, r);
        g_comm->reduce_scatter(io.data(), io.data() + r * per * es, per, t, op);
        EXPECT_EQ(
            std::vector<unsigned char>(io.begin() + r * per * es, io.begin() + (r + 1) * per * es),
            want)
            << "in-place " << dtype_name(t) << " per " << per;
      }
}

// The non-blocking reduce-scatter gives the blocking call's bits, with several in flight at once
// (ZeRO-1 keeps two buckets moving) and started while a blocking collective runs between them.
// Under comm.mpi_np*_split every piece is at most 1001 bytes, so the split path runs too.
TEST(Mpi, StartedReduceScatterIsTheBlockingOne) {
  const int r = g_comm->rank(), w = g_comm->world_size();
  for (const DType t : kTypes)
    for (const ReduceOp op : kOps) {
      const std::vector<size_t> pers = {1, 5, 333, 4000};
      std::vector<std::vector<unsigned char>> ins, outs, wants;
      std::vector<std::unique_ptr<Transfer>> moving;
      for (size_t k = 0; k < pers.size(); ++k) {
        const size_t per = pers[k], es = dtype_size(t);
        const auto full = expected_reduce(t, per * w, op, 17 * k);
        wants.emplace_back(full.begin() + r * per * es, full.begin() + (r + 1) * per * es);
        ins.push_back(make(t, per * w, r, 17 * k));
        outs.emplace_back(per * es, 0xAB);
      }
      for (size_t k = 0; k < pers.size(); ++k) {
        moving.push_back(
            g_comm->start_reduce_scatter(ins[k].data(), outs[k].data(), pers[k], t, op));
        if (k == 1) {  // a blocking collective while two are in flight
          int32_t one = 1, n = 0;
          g_comm->all_reduce(&one, &n, 1, DType::I32, ReduceOp::Sum);
          EXPECT_EQ(n, w);
        }
        if (k == 0)  // every rank polls until it arrives (polling moves it: no progress thread)
          while (!moving.back()->test()) {
          }
        else
          moving.back()->test();
      }
      for (size_t k = pers.size(); k-- > 0;) moving[k]->wait();  // any order of waits
      for (size_t k = 0; k < pers.size(); ++k)
        EXPECT_EQ(outs[k], wants[k])
            << dtype_name(t) << " " << reduce_op_name(op) << " per " << pers[k];
    }
}

// The reduce onto one rank (ZeRO-2 moves each range to its owner with it): on root, the
// rank-order reduction the other collectives give, for every root, with several in flight and
// started from the last root down as ZeRO-2 starts them; on the other ranks recv is not written.
TEST(Mpi, StartedReduceGivesRootTheRankOrderReduction) {
  const int r = g_comm->rank(), w = g_comm->world_size();
  for (const DType t : kTypes)
    for (const ReduceOp op : kOps) {
      const std::vector<size_t> counts = {0, 1, 5, 333, 4000};
      std::vector<std::vector<unsigned char>> ins, outs, wants;
      std::vector<int> roots;
      for (int root = w - 1; root >= 0; --root)
        for (size_t k = 0; k < counts.size(); ++k) {
          const size_t seed = 31 * size_t(root) + k;
          wants.push_back(expected_reduce(t, counts[k], op, seed));
          ins.push_back(make(t, counts[k], r, seed));
          outs.emplace_back(counts[k] * dtype_size(t), 0xAB);
          roots.push_back(root);
        }
      std::vector<std::unique_ptr<Transfer>> moving;
      for (size_t i = 0; i < ins.size(); ++i) {
        moving.push_back(g_comm->start_reduce(ins[i].data(), outs[i].data(),
                                              ins[i].size() / dtype_size(t), t, op, roots[i]));
        moving.back()->test();
      }
      for (size_t i = moving.size(); i-- > 0;) moving[i]->wait();  // any order of waits
      for (size_t i = 0; i < ins.size(); ++i) {
        const std::vector<unsigned char> untouched(outs[i].size(), 0xAB);
        EXPECT_EQ(outs[i], roots[i] == r ? wants[i] : untouched)
            << dtype_name(t) << " " << reduce_op_name(op) << " root " << roots[i] << " count "
            << outs[i].size() / dtype_size(t);
      }
    }
}

TEST(Mpi, AllGatherInAndOutOfPlace) {
  const int r = g_comm->rank(), w = g_comm->world_size();
  for (const DType t : kTypes)
    for (const size_t per : {size_t(1), size_t(5), size_t(333), size_t(40000)}) {
      const size_t es = dtype_size(t);
      std::vector<unsigned char> want;
      for (int j = 0; j < w; ++j) {
        const auto c = make(t, per, j);
        want.insert(want.end(), c.begin(), c.end());
      }
      const auto in = make(t, per, r);
      std::vector<unsigned char> out(per * w * es, 0xAB);
      g_comm->all_gather(in.data(), out.data(), per, t);
      EXPECT_EQ(out, want) << dtype_name(t) << " per " << per;
      std::vector<unsigned char> io(per * w * es, 0xCD);
      std::memcpy(io.data() + r * per * es, in.data(), in.size());
      g_comm->all_gather(io.data() + r * per * es, io.data(), per, t);
      EXPECT_EQ(io, want) << "in-place " << dtype_name(t) << " per " << per;
    }
}

TEST(Mpi, BroadcastFromEveryRoot) {
  const int r = g_comm->rank();
  for (int root = 0; root < g_comm->world_size(); ++root)
    for (const size_t n : kCounts) {
      const auto want = make(DType::F32, n, root);
      const auto in = make(DType::F32, n, r);
      std::vector<unsigned char> out(in.size(), 0xAB);
      g_comm->broadcast(in.data(), out.data(), n, DType::F32, root);
      EXPECT_EQ(out, want) << "root " << root << " count " << n;
      auto io = make(DType::F32, n, r);
      g_comm->broadcast(io.data(), io.data(), n, DType::F32, root);
      EXPECT_EQ(io, want) << "in-place root " << root << " count " << n;
    }
}

TEST(Mpi, SendRecvRing) {
  const int r = g_comm->rank(), w = g_comm->world_size();
  const int next = (r + 1) % w, prev = (r + w - 1) % w;
  const auto mine = make(DType::I32, 257, r);
  std::vector<unsigned char> got(mine.size());
  // Even ranks send first and odd ranks receive first, so blocking sends cannot all wait.
  if (r % 2 == 0) {
    g_comm->send(mine.data(), 257, DType::I32, next, 42);
    g_comm->recv(got.data(), 257, DType::I32, prev, 42);
  } else {
    g_comm->recv(got.data(), 257, DType::I32, prev, 42);
    g_comm->send(mine.data(), 257, DType::I32, next, 42);
  }
  EXPECT_EQ(got, make(DType::I32, 257, prev));
  g_comm->barrier();
}

// comm.mpi_np*_split run every test of this file with ZAYA_TEST_MPI_MAX_CALL_BYTES=1001: each
// collective and message is then split into many MPI calls (MpiCommunicator::max_call_bytes),
// odd-sized pieces included, and must still give the exact results above.
TEST(Mpi, CallLimitIsTheOneAsked) {
  const auto* mpi = dynamic_cast<const MpiCommunicator*>(g_comm);
  ASSERT_NE(mpi, nullptr);
  const char* asked = std::getenv("ZAYA_TEST_MPI_MAX_CALL_BYTES");
  EXPECT_EQ(mpi->max_call_bytes(), asked ? size_t(std::stoull(asked)) : size_t(INT_MAX));
}

TEST(Mpi, BadPeerIsAnError) {
  float x = 0;
  EXPECT_THROW(g_comm->send(&x, 1, DType::F32, g_comm->world_size(), 0), Error);
  EXPECT_THROW(g_comm->broadcast(&x, &x, 1, DType::F32, -1), Error);
}

}  // namespace
}  // namespace zaya::dist

int main(int argc, char** argv) {
  // The BLAS kernels chosen and checked as zaya's main does, before MPI starts (it may restart the
  // process).
  try {
    zaya::cpu::blas::prepare_blas(argc, argv);
  } catch (const zaya::Error& e) {
    std::fprintf(stderr, "zaya_comm_mpi_tests: %s\n", e.what());
    return 1;
  }
  // Every rank prints, so a failure on any rank is visible with its rank.
  zaya::dist::DistContext dist(&argc, &argv, /*quiet_other_ranks=*/false);
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = zaya::dist::make_communicator();
  zaya::dist::g_comm = comm.get();
  if (const char* limit = std::getenv("ZAYA_TEST_MPI_MAX_CALL_BYTES"))
    dynamic_cast<zaya::dist::MpiCommunicator&>(*comm).set_max_call_bytes(std::stoull(limit));
  int32_t failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // All ranks exit with the same status.
  comm->all_reduce(&failed, &failed, 1, zaya::DType::I32, zaya::dist::ReduceOp::Max);
  return failed;
}
