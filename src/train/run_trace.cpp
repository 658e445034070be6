#include "train/run_trace.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/output_path.h"

namespace zaya {

std::optional<TraceWindow> parse_trace_steps(const std::string& text) {
  long long a = 0, b = 0;
  char colon = 0, extra = 0;
  std::istringstream in(text);
  const bool ok = bool(in >> a >> colon >> b) && colon == ':' && !(in >> extra);
  if (!ok || a < 1 || b < a) return std::nullopt;
  return TraceWindow{a, b};
}

RunTrace::RunTrace(const std::string& path, TraceWindow window, dist::Communicator& comm)
    : path_(path), window_(window), comm_(comm) {
  // A run never replaces a file it did not make: FILE (and the ranks' parts beside it) must be new.
  for (const std::string& p : {path_, part_path(comm.rank())}) {
    ZAYA_CHECK(!std::filesystem::exists(std::filesystem::symlink_status(p)), "--trace: '", p,
               "' already exists; nothing was changed (choose another path)");
    check_output(OutputRule{"--trace", p, OutputKind::kFile, false, {}});
  }
  comm_.barrier();  // every rank's clock starts here
  recorder_ = std::make_unique<trace::Recorder>();
  trace::name_thread("train");
}

std::string RunTrace::part_path(int rank) const {
  return path_ + ".rank" + std::to_string(rank);
}

void RunTrace::at_step(int64_t step) {
  recorder_->set_enabled(step >= window_.first && step <= window_.last);
}

void RunTrace::write() {
  recorder_->set_enabled(false);
  const int rank = comm_.rank(), world = comm_.world_size();
  {
    std::ofstream part(part_path(rank), std::ios::binary);
    part << recorder_->events_json(rank);
    ZAYA_CHECK(bool(part.flush()), "--trace: cannot write ", part_path(rank));
  }
  comm_.barrier();
  if (rank == 0) {
    std::string text = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
    for (int r = 0; r < world; ++r) {
      std::ifstream part(part_path(r), std::ios::binary);
      ZAYA_CHECK(bool(part), "--trace: rank ", r, "'s part ", part_path(r),
                 " is missing (the ranks must share the directory of --trace)");
      std::ostringstream events;
      events << part.rdbuf();
      if (r > 0) text += ",\n";
      text += events.str();
    }
    text += "\n]}\n";
    write_output_file(OutputRule{"--trace", path_, OutputKind::kFile, false, {}}, text);
    std::fprintf(stderr, "trace of steps %lld to %lld (%d rank%s): %s\n", (long long)window_.first,
                 (long long)window_.last, world, world == 1 ? "" : "s", path_.c_str());
  }
  comm_.barrier();
  std::filesystem::remove(part_path(rank));
}

}  // namespace zaya
