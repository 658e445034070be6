// zaya bench comm and zaya bench ckpt: the benchmarks that run under mpirun.
#include "cmd_comm.h"

#include <cstdio>
#include <memory>
#include <string>

#include "backend/cuda/plugin_api.h"
#include "backend/device_select.h"
#include "bench/ckpt_bench.h"
#include "bench/comm_bench.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/dist_context.h"
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
  comm->add_option("--device", args->device,
                   "cpu (MPI over host memory), cuda (NCCL over GPU memory, one GPU per local "
                   "rank; sums in rank order: all-to-all plus a local reduction) or "
                   "cpu-as-device (MPI over the memory of the CPU backend that stands in for a "
                   "GPU: the buffers filled and checked through copies, as with cuda)")
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

  return [=]() -> int {
    if (*ckpt) {
      auto communicator = dist::make_communicator();
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
    if (args->device == "cuda") {  // GPU memory, NCCL moving it
      const cuda::PluginApi& gpu = usable_gpu("--device");
      nccl = gpu.make_nccl_communicator(*communicator, true);
      if (args->peer) peer = gpu.make_nccl_communicator(*communicator, false);
      moving = nccl.get();
      memory = &gpu.backend(false);
    } else {
      ZAYA_CHECK(args->device == "cpu" || args->device == "cpu-as-device",
                 "--device: expected cpu, cuda or cpu-as-device, got '", args->device, "'");
      if (args->device == "cpu-as-device") memory = &cpu_as_device_backend();
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
