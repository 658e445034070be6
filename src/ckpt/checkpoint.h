// Sharded checkpoints. A checkpoint is a directory ROOT/step-NNNNNNNN/ holding
//   rank-RRRRR.safetensors  one per rank, each written by its rank at the same time;
//   manifest.json           global tensor shapes/dtypes, which flat-range chunk of which tensor
//                           each file holds, the optimizer state layout, trainer state (step,
//                           tokens, global sample index g, optimizer/balancer step counts), the
//                           config, the seed, the world size and an FNV-1a 64 checksum per file;
//   COMPLETE                written last; holds the manifest's checksum.
// Rank r owns its ShardLayout range of the registry layout (T floats, W ranks: chunks of
// ceil(T/W) floats), the ZeRO-1 partition; a tensor cut by a range boundary is stored as 1-D
// chunks, so a loader for any world size can assemble any tensor from the chunks that overlap it.
// Writes go to step-N.tmp/ (files and directory fsynced) and are renamed into place, so a crash
// never leaves a directory that looks complete.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "model/params.h"

namespace zaya {

namespace dist {
class Communicator;
}
class Optimizer;
class RouterBalancer;

// Everything besides tensors that a bitwise-exact resume needs.
struct TrainerState {
  int64_t step = 0;          // optimizer steps done
  int64_t tokens_done = 0;   // selects the curriculum phase
  int64_t sample_index = 0;  // global sample index g: the loader's order is a pure function of it
  int64_t optimizer_steps = 0;  // AdamW bias correction t
  int64_t balancer_steps = 0;   // router-bias AdamW t
  uint64_t seed = 0;            // the only RNG state: data order and init derive from it
  nlohmann::json config;        // the run's whole config file
};

// An in-memory copy of one rank's part of the model and optimizer state, taken between steps;
// writing it may then proceed while training changes the live buffers. The flat tensors hold the
// rank's ShardLayout range [begin, end) of the registry layout (the whole buffer in one process).
struct CheckpointSnapshot {
  TrainerState state;
  std::vector<ParamSpec> specs;            // registry layout
  int64_t total = 0;                       // floats in the flat layout
  int rank = 0, world_size = 1;            // whose range this is, of how many
  int64_t begin = 0, end = 0;              // the flat range held below
  Tensor weights, exp_avg, exp_avg_sq;     // [end − begin]
  std::map<std::string, Tensor> balancer;  // router balancer state (replicated; rank 0 writes it)
};

// This rank's range: the optimizer's shard (the whole buffer without a communicator).
CheckpointSnapshot take_snapshot(const ParamStore& params, const Optimizer& optimizer,
                                 const RouterBalancer& balancer, TrainerState state);

// "ROOT/step-00000042" and "rank-00003.safetensors".
std::string checkpoint_dir_name(const std::string& root, int64_t step);
// The step of a committed checkpoint directory's name "step-NNNNNNNN"; nothing for other names,
// the "step-N.tmp" of an unfinished save among them.
std::optional<int64_t> committed_checkpoint_step(const std::string& dir_name);
std::string checkpoint_rank_file(int rank);

// The three stages of a save, so that every rank can write its own file at the same time:
//  1. prepare_checkpoint_dir (one process): an empty ROOT/step-N.tmp/, returned;
//  2. write_rank_file (every rank, in parallel): rank-RRRRR.safetensors of the snapshot's
//     range, fsynced; returns its "files" manifest entry {name, rank, bytes, fnv1a64};
//  3. commit_checkpoint (one process, after every rank's file is written): manifest.json from
//     the layout and the files' entries, the COMPLETE marker, fsync, rename to ROOT/step-N/.
std::string prepare_checkpoint_dir(const std::string& root, int64_t step);
nlohmann::json write_rank_file(const std::string& tmp_dir, const CheckpointSnapshot& snap);
std::string commit_checkpoint(const std::string& root, const CheckpointSnapshot& snap,
                              const nlohmann::json& files);

// All three stages in one process: a whole-buffer snapshot written as `world_size` rank files
// (the single-writer save, and tests of other world sizes). Returns the final directory.
// Replaces an existing directory of the same step.
std::string write_checkpoint(const std::string& root, const CheckpointSnapshot& snap,
                             int world_size = 1);

// A checkpoint read back: manifest plus every tensor assembled to its global shape.
struct LoadedCheckpoint {
  std::string dir;
  nlohmann::json manifest;
  TrainerState state;
  int world_size = 1;
  std::map<std::string, Tensor> tensors;  // manifest tensor name -> full tensor
};

// Checks the COMPLETE marker, the manifest (fields, types, chunk coverage) and every file's size
// and checksum; throws zaya::Error naming the directory, file and field. Returns the manifest.
// With a communicator of N ranks (collective) the checksums are shared: rank r reads files
// r, r + N, ..., and every rank throws the first failing rank's error. `checksums` false checks
// all but the checksums (a checkpoint verified a moment ago).
nlohmann::json verify_checkpoint(const std::string& dir, dist::Communicator* comm = nullptr,
                                 bool checksums = true);
// Verifies, then reads every file whole and assembles every tensor (single-process tools).
LoadedCheckpoint load_checkpoint(const std::string& dir);
// The manifest's trainer state and world size, without tensors.
LoadedCheckpoint checkpoint_header(const std::string& dir, const nlohmann::json& manifest);

// Copies a loaded checkpoint into the live state; shapes must match the model's registry.
void restore_checkpoint(const LoadedCheckpoint& ck, ParamStore& params, Optimizer& optimizer,
                        RouterBalancer& balancer);
// The resume of one rank (ckpt/checkpoint_restore.cpp): from a verified checkpoint's header,
// reads every weight and only the optimizer state of this rank's range (the chunks that overlap
// it, and of those only the overlapping bytes) straight into the live buffers. Nothing else is
// held: a rank of N needs no memory beyond its own state. Returns the bytes read.
uint64_t restore_checkpoint_range(const LoadedCheckpoint& header, ParamStore& params,
                                  Optimizer& optimizer, RouterBalancer& balancer);
// The weights alone (export, score, generate, --init-from): no optimizer state is read.
uint64_t restore_checkpoint_weights(const LoadedCheckpoint& header, ParamStore& params);

// The newest checkpoint under root that verifies; each skipped one is reported through `skipped`
// ("checkpoint DIR: reason, skipped") and, when `damaged` is given, the committed step-N dirs
// that failed to verify are listed there. Empty when none qualifies.
// With a communicator, collective: the checksums are shared as in verify_checkpoint.
std::string find_latest_checkpoint(const std::string& root,
                                   const std::function<void(const std::string&)>& skipped,
                                   dist::Communicator* comm = nullptr,
                                   std::vector<std::string>* damaged = nullptr);

// Moves a damaged checkpoint step-N/ aside, to step-N.damaged-YYYYmmddTHHMMSS/ (UTC) beside it,
// and returns the new path. Damaged checkpoints are evidence of a fault: under its own name the
// next save of step N would replace it and retention would delete it; under this name neither a
// save, retention nor a resume ever touches it.
std::string set_aside_damaged_checkpoint(const std::string& dir);

// Retention after the save of step `saved_step`: among the complete checkpoints of steps up to
// saved_step, keeps the newest keep_last (≥ 1, so never the one just saved) and every one whose
// step is a multiple of keep_every (0 = none), and removes the others. Checkpoints of later steps
// are not this timeline's (another run's, or past a rollback) and are never touched: once, a
// damaged step-20 of an earlier run counted as "newer" and retention deleted the step-5 just
// written. Returns the removed dirs.
std::vector<std::string> apply_retention(const std::string& root, int keep_last, int64_t keep_every,
                                         int64_t saved_step);

}  // namespace zaya
