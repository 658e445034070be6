// Reads the ranks' heartbeat histories (OUT/heartbeat/rank-RRRRR.jsonl, see train/heartbeat.h)
// incrementally: each call returns the records appended since the previous one, in file order per
// rank. A line without its newline yet is left for the next call.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "train/heartbeat.h"

namespace zaya::aegis {

class HeartbeatReader {
 public:
  explicit HeartbeatReader(std::string out_dir) : out_dir_(std::move(out_dir)) {}
  // Before each launch, so that only the new attempt's beats are read: moves the heartbeat files
  // of the previous attempt to archive_dir (kept for post-mortems; empty: deletes them) and
  // forgets the read positions.
  void clear(const std::string& archive_dir);
  std::vector<Heartbeat> read_new();

 private:
  std::string out_dir_;
  std::map<std::string, long long> offsets_;  // file -> bytes consumed
};

}  // namespace zaya::aegis
