// zaya bench comm and zaya bench ckpt: the benchmarks that run under mpirun.
#include "cmd_comm.h"

#include <cstdio>
#include <memory>
#include <string>

#include "backend/device_select.h"
#include "bench/ckpt_bench.h"
#include "bench/comm_bench.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/dist_context.h"
#include "io/output_path.h"
#ifdef ZAYA_HAVE_MPI
#include "dist/mpi_native_communicator.h"
#endif

namespace zaya::cli {

namespace {

struct CommArgs {
  std::string min_bytes = "8", max_bytes = "64M", dtype = "float";
  CommBenchOptions opt;
  bool peer = false;
  std::string device = "cpu";
  CkptBenchOptions ckpt;
  bool ckpt_force = false;  // bench ckpt --force: --dir may be an existing, non-empty directory
};

}  // namespace

Runner add_comm_commands(CLI::App& bench) {
  auto args = std::make_shared<CommArgs>();
  auto* comm = bench.add_subcommand(
      "comm",
      "nccl-tests-style bandwidth of the collectives on this build's communicator (run it under "
      "mpirun/srun for several ranks)");
  comm->add_option("-b,--minbytes", args->min_bytes, "smallest message (bytes; K, M, G suffixes)")
      ->capture_default_str();
  comm->add_option("-e,--maxbytes", args->max_bytes, "largest message (bytes; K, M, G suffixes)")
      ->capture_default_str();
  comm->add_option("-f,--stepfactor", args->opt.factor, "message size factor")
      ->capture_default_str()
      ->check(AtLeast(1.0, true));
  comm->add_option("-n,--iters", args->opt.iters, "timed iterations per size")
      ->capture_default_str()
      ->check(PositiveInt());
  comm->add_option("-w,--warmup_iters", args->opt.warmup, "untimed warm-up iterations")
      ->capture_default_str()
      ->check(NonNegativeInt());
  comm->add_option("-c,--check", args->opt.check, "1: verify the results of every size")
      ->capture_default_str()
      ->check(IntIn(0, 1));
  comm->add_option("-d,--datatype", args->dtype, "float, bfloat16 or int32")->capture_default_str();
  comm->add_option("--ops", args->opt.ops, "comma-separated collectives")
      ->delimiter(',')
      ->capture_default_str();
  comm->add_flag(
      "--peer", args->peer,
      "also time the peer's own collectives out of place in the same run, with their "
      "busbw and the zaya/peer ratio: MPI's (MPI_Allreduce, ...; float/int32) on the "
      "CPU, NCCL's own reductions (ncclReduceScatter, ncclAllReduce) with --device cuda");
  comm->add_option(
          "--device", args->device,
          "cpu (MPI over host memory), cuda (NCCL over GPU memory, one GPU per local "
          "rank; sums in rank order: all-to-all plus a local reduction) or "
          "cpu-as-device (MPI over the memory of the CPU backend that stands in for a "
          "GPU: the buffers filled and checked through copies, as with cuda); any device of "
          "`zaya info --devices`")
      ->capture_default_str();

  auto* ckpt = bench.add_subcommand(
      "ckpt",
      "Checkpoint save time: every rank writing its own file at once against rank 0 gathering "
      "and writing everything (run under mpirun for several ranks)");
  ckpt->add_option("--config", args->ckpt.config_path, "zaya JSON config (its model section)")
      ->required()
      ->check(ExistingFile());
  ckpt->add_option("--dir", args->ckpt.dir, "scratch directory for the checkpoints (removed)")
      ->capture_default_str()
      ->check(OutputDir());
  ckpt->add_option("--repeats", args->ckpt.repeats, "saves per scheme; the median is reported")
      ->capture_default_str()
      ->check(PositiveInt());
  ckpt->add_flag("--force", args->ckpt_force,
                 "use (and at the end remove) an existing, non-empty --dir");

  return [=]() -> int {
    if (*ckpt) {
      auto communicator = dist::make_communicator();
      // The scratch directory is removed at the end: one that holds anything else is refused.
      // Every rank looks before any writes.
      check_output({"--dir",
                    args->ckpt.dir,
                    OutputKind::kDirectory,
                    args->ckpt_force,
                    {args->ckpt.config_path}});
      communicator->barrier();
      run_ckpt_bench(*communicator, args->ckpt, stdout);
      return 0;
    }
    if (!*comm) return kNotMine;
    args->opt.min_bytes = parse_byte_size(args->min_bytes, "-b/--minbytes");
    args->opt.max_bytes = parse_byte_size(args->max_bytes, "-e/--maxbytes");
    args->opt.dtype = parse_comm_dtype(args->dtype);
    auto communicator = dist::make_communicator();
    // What moves the buffers, in whose memory; the host communicator carries the numbers.
    std::unique_ptr<dist::Communicator> nccl, peer;
    dist::Communicator* moving = communicator.get();
    const Backend* memory = nullptr;
    const ComputeDevice device = open_device(args->device, Precision::kFp32);
    device.check_world(communicator->world_size());
    if (device.caps().own_memory) memory = device.backend;
    if (device.caps().own_collectives) {  // the device's memory, its collectives moving it (NCCL)
      nccl = device.make_collective(*communicator, true);
      if (args->peer) peer = device.make_collective(*communicator, false);
      moving = nccl.get();
    } else {
      if (args->peer) {
#ifdef ZAYA_HAVE_MPI
        ZAYA_CHECK(dist::mpi_active(),
                   "--peer: MPI's collectives are the peer, so run under "
                   "mpirun or srun (this process was not started by an MPI launcher)");
        peer = std::make_unique<dist::NativeMpiCommunicator>();
#else
        ZAYA_FAIL("--peer: this zaya was built without MPI, so there is no MPI peer to time");
#endif
      }
    }
    const int64_t wrong =
        run_comm_bench(*moving, args->opt, stdout, peer.get(), memory, communicator.get());
    if (wrong != 0) {
      // Every rank has the same total; one report is enough.
      if (communicator->rank() == 0)
        std::fprintf(stderr, "zaya: error: bench comm: %lld wrong values\n", (long long)wrong);
      return 1;
    }
    return 0;
  };
}

}  // namespace zaya::cli
