#include "bench/comm_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace zaya {

namespace {

using dist::Communicator;
using dist::ReduceOp;

enum class Op { AllReduce, ReduceScatter, AllGather, Broadcast };

struct OpInfo {
  const char* name;
  Op op;
};
constexpr OpInfo kOps[] = {{"all_reduce", Op::AllReduce},
                           {"reduce_scatter", Op::ReduceScatter},
                           {"all_gather", Op::AllGather},
                           {"broadcast", Op::Broadcast}};

// nccl-tests' busbw factors: the fraction of S each rank's link must carry at the optimum, which
// makes busbw comparable with the hardware bandwidth whatever the world size.
double busbw_factor(Op op, int n) {
  switch (op) {
    case Op::AllReduce:
      return 2.0 * (n - 1) / n;
    case Op::ReduceScatter:
    case Op::AllGather:
      return double(n - 1) / n;
    case Op::Broadcast:
      return 1.0;
  }
  return 1.0;
}

// Small integers, different per rank and index: sums over many ranks stay exact in float and
// bf16, so checking is an exact comparison.
double fill_value(int rank, size_t i) {
  return double(int((rank * 7 + i * 3) % 11) - 5);
}

void put(void* buf, size_t i, DType t, double v) {
  switch (t) {
    case DType::F32:
      static_cast<float*>(buf)[i] = float(v);
      return;
    case DType::I32:
      static_cast<int32_t*>(buf)[i] = int32_t(v);
      return;
    case DType::BF16:
      static_cast<uint16_t*>(buf)[i] = f32_to_bf16(float(v));
      return;
  }
}

double get(const void* buf, size_t i, DType t) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(buf)[i];
    case DType::I32:
      return static_cast<const int32_t*>(buf)[i];
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(buf)[i]);
  }
  return 0;
}

// One size of one op: element counts and where the input and output live.
struct Layout {
  size_t count = 0;     // the table's count: elements of S
  size_t in_count = 0;  // elements each rank contributes
  size_t out_count = 0;
};

Layout shape_for(Op op, size_t elems, int n) {
  const size_t per = elems / size_t(n);
  switch (op) {
    case Op::AllReduce:
    case Op::Broadcast:
      return {elems, elems, elems};
    case Op::ReduceScatter:
      return {per * n, per * n, per};
    case Op::AllGather:
      return {per * n, per, per * n};
  }
  return {};
}

class Runner {
 public:
  // The buffers live in `memory` (host memory, or a GPU's for a communicator that moves it);
  // `control` carries the host's numbers (the mean time, the count of wrong values).
  Runner(Communicator& comm, Communicator& control, const Backend& memory,
         const CommBenchOptions& opt)
      : comm_(comm),
        control_(control),
        be_(memory),
        opt_(opt),
        host_(opt.max_bytes / 8 + 1),
        a_(memory, host_.size() * 8),
        b_(memory, host_.size() * 8) {}

  struct Result {
    double time_us = 0;
    int64_t wrong = 0;
  };

  Result measure(Op op, const Layout& s, bool in_place) {
    const DType t = opt_.dtype;
    const size_t esize = dtype_size(t);
    const int r = comm_.rank();
    // In-place layouts follow NCCL: reduce_scatter's output is the rank's slot of the input,
    // all_gather's input is the rank's slot of the output.
    unsigned char* in = bytes(a_);
    unsigned char* out = in_place ? bytes(a_) : bytes(b_);
    if (in_place && op == Op::ReduceScatter) out = in + size_t(r) * s.out_count * esize;
    if (in_place && op == Op::AllGather) in = out + size_t(r) * s.in_count * esize;
    unsigned char* host = bytes(host_);
    auto fill = [&] {  // written on the host, copied into the buffers' memory
      for (size_t i = 0; i < s.in_count; ++i) put(host, i, t, fill_value(r, i));
      be_.to_device(in, host, s.in_count * esize);
    };
    auto once = [&] {
      switch (op) {
        case Op::AllReduce:
          comm_.all_reduce(in, out, s.count, t, ReduceOp::Sum);
          break;
        case Op::ReduceScatter:
          comm_.reduce_scatter(in, out, s.out_count, t, ReduceOp::Sum);
          break;
        case Op::AllGather:
          comm_.all_gather(in, out, s.in_count, t);
          break;
        case Op::Broadcast:
          comm_.broadcast(in, out, s.count, t, 0);
          break;
      }
    };
    fill();
    for (int i = 0; i < opt_.warmup; ++i) once();
    comm_.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < opt_.iters; ++i) once();
    const double local_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        opt_.iters;
    Result res;
    // The reported time is the mean over ranks, as nccl-tests' default (-a 1).
    float sum_us = float(local_us);
    control_.all_reduce(&sum_us, &sum_us, 1, DType::F32, ReduceOp::Sum);
    res.time_us = double(sum_us) / comm_.world_size();
    if (opt_.check) {
      fill();
      once();
      be_.to_host(host, out, s.out_count * esize);
      int32_t wrong = int32_t(std::min<int64_t>(count_wrong(op, s, host), INT32_MAX));
      control_.all_reduce(&wrong, &wrong, 1, DType::I32, ReduceOp::Sum);
      res.wrong = wrong;
    }
    return res;
  }

 private:
  static unsigned char* bytes(std::vector<uint64_t>& v) {
    return reinterpret_cast<unsigned char*>(v.data());
  }
  static unsigned char* bytes(BackendBuffer& b) { return static_cast<unsigned char*>(b.get()); }

  int64_t count_wrong(Op op, const Layout& s, const void* out) const {
    const int n = comm_.world_size(), r = comm_.rank();
    int64_t wrong = 0;
    for (size_t i = 0; i < s.out_count; ++i) {
      double want = 0;
      switch (op) {
        case Op::AllReduce:
          for (int j = 0; j < n; ++j) want += fill_value(j, i);
          break;
        case Op::ReduceScatter:
          for (int j = 0; j < n; ++j) want += fill_value(j, size_t(r) * s.out_count + i);
          break;
        case Op::AllGather:
          want = fill_value(int(i / s.in_count), i % s.in_count);
          break;
        case Op::Broadcast:
          want = fill_value(0, i);
          break;
      }
      if (get(out, i, opt_.dtype) != want) ++wrong;
    }
    return wrong;
  }

  Communicator& comm_;
  Communicator& control_;
  const Backend& be_;
  const CommBenchOptions& opt_;
  std::vector<uint64_t> host_;  // the host's copy to fill and check (8-byte aligned)
  BackendBuffer a_, b_;
};

void print_ranks(Communicator& comm, std::FILE* out) {
  // One fixed-size record per rank: pid, then the host name.
  constexpr size_t kInts = 16;
  int32_t mine[kInts] = {};
  mine[0] = int32_t(getpid());
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  std::memcpy(&mine[1], host, (kInts - 1) * sizeof(int32_t) - 1);
  std::vector<int32_t> all(kInts * size_t(comm.world_size()));
  comm.all_gather(mine, all.data(), kInts, DType::I32);
  if (comm.rank() != 0) return;
  for (int j = 0; j < comm.world_size(); ++j) {
    const int32_t* rec = &all[size_t(j) * kInts];
    char name[64] = {};
    std::memcpy(name, &rec[1], (kInts - 1) * sizeof(int32_t) - 1);
    std::fprintf(out, "#  Rank %2d Pid %6d on %10s\n", j, rec[0], name);
  }
}

void print_table_head(std::FILE* out, const Communicator* peer) {
  std::fprintf(out, "#\n%-60s%-33s%-32s%s\n", "#", "out-of-place", "in-place",
               peer ? peer->kind().c_str() : "");
  std::fprintf(out, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "size",
               "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
               "algbw", "busbw", "#wrong");
  if (peer) std::fprintf(out, "  %7s  %6s  %6s", "time", "busbw", "ratio");
  std::fprintf(out, "\n#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
               "");
  if (peer) std::fprintf(out, "  %7s  %6s  %6s", "(us)", "(GB/s)", "zaya/");
  std::fprintf(out, "\n");
}

}  // namespace

size_t parse_byte_size(const std::string& text, const char* flag) {
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  ZAYA_CHECK(pos > 0 && pos + 1 >= text.size(), flag, ": '", text,
             "' is not a byte size (expected a number with an optional K, M or G, e.g. 64M)");
  size_t v = std::stoull(text.substr(0, pos));
  if (pos < text.size()) {
    const char unit = char(std::toupper(static_cast<unsigned char>(text[pos])));
    ZAYA_CHECK(unit == 'K' || unit == 'M' || unit == 'G', flag, ": unit '", text[pos], "' in '",
               text, "' is not K, M or G");
    v <<= unit == 'K' ? 10 : unit == 'M' ? 20 : 30;
  }
  return v;
}

DType parse_comm_dtype(const std::string& text) {
  if (text == "float" || text == "f32") return DType::F32;
  if (text == "bfloat16" || text == "bf16") return DType::BF16;
  if (text == "int32" || text == "i32") return DType::I32;
  ZAYA_FAIL("-d/--datatype: '", text,
            "' is not a supported type (expected float, bfloat16 or int32)");
}

const char* comm_dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "float";
    case DType::BF16:
      return "bfloat16";
    case DType::I32:
      return "int32";
  }
  return "?";
}

int64_t run_comm_bench(Communicator& comm, const CommBenchOptions& opt, std::FILE* out,
                       Communicator* peer, const Backend* memory, Communicator* control) {
  const Backend& be = memory ? *memory : cpu_backend();
  Communicator& host = control ? *control : comm;
  ZAYA_CHECK(!host.device_memory(), "bench comm: the control communicator must move host memory");
  ZAYA_CHECK(opt.min_bytes > 0 && opt.min_bytes <= opt.max_bytes, "-b/-e: need 0 < -b <= -e, got ",
             opt.min_bytes, " and ", opt.max_bytes);
  ZAYA_CHECK(opt.factor > 1, "-f: size factor must be above 1, got ", opt.factor);
  ZAYA_CHECK(opt.iters > 0 && opt.warmup >= 0, "-n must be positive and -w non-negative, got ",
             opt.iters, " and ", opt.warmup);
  std::vector<OpInfo> ops;
  for (const auto& name : opt.ops) {
    const auto it = std::find_if(std::begin(kOps), std::end(kOps),
                                 [&](const OpInfo& o) { return name == o.name; });
    ZAYA_CHECK(it != std::end(kOps), "--ops: '", name,
               "' is not a collective (expected all_reduce, reduce_scatter, all_gather, "
               "broadcast)");
    ops.push_back(*it);
  }
  const bool print = comm.rank() == 0;
  const int n = comm.world_size();
  const DType t = opt.dtype;
  const size_t esize = dtype_size(t);
  if (print)
    std::fprintf(out,
                 "# zaya bench comm: communicator %s, world size %d, minBytes %zu maxBytes %zu "
                 "step: %g(factor) warmup iters: %d iters: %d validation: %d\n#\n"
                 "# Using devices\n",
                 comm.kind().c_str(), n, opt.min_bytes, opt.max_bytes, opt.factor, opt.warmup,
                 opt.iters, opt.check);
  print_ranks(host, out);
  Runner runner(comm, host, be, opt);
  std::unique_ptr<Runner> peer_runner;
  CommBenchOptions peer_opt = opt;
  peer_opt.check = 0;  // the peer's sums are in MPI's order, not necessarily exact
  if (peer) peer_runner = std::make_unique<Runner>(*peer, host, be, peer_opt);
  int64_t total_wrong = 0;
  for (const auto& info : ops) {
    if (print) {
      std::fprintf(out, "#\n# Collective: %s\n", info.name);
      print_table_head(out, peer);
    }
    double busbw_sum = 0, peer_busbw_sum = 0, out_of_place_sum = 0;
    int rows = 0;
    int64_t op_wrong = 0;
    for (size_t bytes = opt.min_bytes; bytes <= opt.max_bytes;
         bytes = std::max(bytes + 1, size_t(double(bytes) * opt.factor))) {
      const Layout s = shape_for(info.op, bytes / esize, n);
      if (s.in_count == 0 || s.out_count == 0) continue;  // too small to split over n ranks
      const size_t size = s.count * esize;
      const bool reduces = info.op == Op::AllReduce || info.op == Op::ReduceScatter;
      double row_busbw = 0;  // out of place, for the ratio to the peer
      if (print)
        std::fprintf(out, "%12zu  %12zu  %8s  %6s  %6d", size, s.count, comm_dtype_name(t),
                     reduces ? "sum" : "none", info.op == Op::Broadcast ? 0 : -1);
      for (const bool in_place : {false, true}) {
        const auto res = runner.measure(info.op, s, in_place);
        const double algbw = double(size) / 1e9 / (res.time_us / 1e6);
        const double busbw = algbw * busbw_factor(info.op, n);
        busbw_sum += busbw;
        if (!in_place) {
          out_of_place_sum += busbw;
          row_busbw = busbw;
        }
        ++rows;
        op_wrong += res.wrong;
        if (!print) continue;
        std::fprintf(out, "  %7.2f  %6.2f  %6.2f", res.time_us, algbw, busbw);
        if (opt.check)
          std::fprintf(out, "  %6lld", (long long)res.wrong);
        else
          std::fprintf(out, "  %6s", "N/A");
      }
      if (peer_runner) {
        const auto res = peer_runner->measure(info.op, s, false);
        const double busbw = double(size) / 1e9 / (res.time_us / 1e6) * busbw_factor(info.op, n);
        peer_busbw_sum += busbw;
        if (print)
          std::fprintf(out, "  %7.2f  %6.2f  %6.2f", res.time_us, busbw, row_busbw / busbw);
      }
      if (print) std::fprintf(out, "\n");
    }
    total_wrong += op_wrong;
    if (print) {
      std::fprintf(out, "# Out of bounds values : %lld %s\n", (long long)op_wrong,
                   op_wrong == 0 ? "OK" : "FAILED");
      std::fprintf(out, "# Avg bus bandwidth    : %g\n", rows ? busbw_sum / rows : 0.0);
      if (peer_runner && rows > 0)
        std::fprintf(out, "# Avg bus bandwidth of %s (out-of-place): %g, zaya's: %g (ratio %.2f)\n",
                     peer->kind().c_str(), peer_busbw_sum / (rows / 2),
                     out_of_place_sum / (rows / 2), out_of_place_sum / peer_busbw_sum);
      std::fprintf(out, "#\n");
      std::fflush(out);
    }
  }
  return total_wrong;
}

}  // namespace zaya
