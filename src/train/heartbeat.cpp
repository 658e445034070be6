#include "train/heartbeat.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "io/text_file.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string rank_file(const std::string& out_dir, int rank, const char* ext) {
  char name[40];
  std::snprintf(name, sizeof name, "rank-%05d.%s", rank, ext);
  return (fs::path(heartbeat_dir(out_dir)) / name).string();
}

json finite_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

double number_or_nan(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::numeric_limits<double>::quiet_NaN();
  return j[key].get<double>();
}

}  // namespace

std::string heartbeat_dir(const std::string& out_dir) {
  return (fs::path(out_dir) / "heartbeat").string();
}

std::string heartbeat_history_path(const std::string& out_dir, int rank) {
  return rank_file(out_dir, rank, "jsonl");
}

const char* beat_phase_name(BeatPhase phase) {
  switch (phase) {
    case BeatPhase::kStart:
      return "start";
    case BeatPhase::kStep:
      return "step";
    case BeatPhase::kCheckpoint:
      return "checkpoint";
    case BeatPhase::kDone:
      return "done";
  }
  return "?";
}

json heartbeat_to_json(const Heartbeat& hb) {
  return {{"rank", hb.rank},
          {"step", hb.step},
          {"loss", finite_or_null(hb.loss)},
          {"grad_norm", finite_or_null(hb.grad_norm)},
          {"step_time_s", hb.step_time_s},
          {"sample_begin", hb.sample_begin},
          {"sample_end", hb.sample_end},
          {"phase", beat_phase_name(hb.phase)},
          {"host", hb.host},
          {"pid", hb.pid},
          {"time", hb.time}};
}

Heartbeat heartbeat_from_json(const json& j, const std::string& where) {
  Heartbeat hb;
  try {
    hb.rank = j.at("rank").get<int>();
    hb.step = j.at("step").get<int64_t>();
    hb.loss = number_or_nan(j, "loss");
    hb.grad_norm = number_or_nan(j, "grad_norm");
    hb.step_time_s = j.at("step_time_s").get<double>();
    hb.sample_begin = j.at("sample_begin").get<int64_t>();
    hb.sample_end = j.at("sample_end").get<int64_t>();
    const std::string phase = j.at("phase").get<std::string>();
    bool known = false;
    for (const BeatPhase p :
         {BeatPhase::kStart, BeatPhase::kStep, BeatPhase::kCheckpoint, BeatPhase::kDone})
      if (phase == beat_phase_name(p)) {
        hb.phase = p;
        known = true;
      }
    ZAYA_CHECK(known, where, ": field 'phase' must be start, step, checkpoint or done, got '",
               phase, "'");
    hb.host = j.at("host").get<std::string>();
    hb.pid = j.at("pid").get<int64_t>();
    hb.time = j.at("time").get<double>();
  } catch (const json::exception& e) {
    ZAYA_FAIL(where, ": not a heartbeat record (expected rank, step, loss, grad_norm, ",
              "step_time_s, sample_begin, sample_end, phase, host, pid, time): ", e.what());
  }
  return hb;
}

HeartbeatWriter::HeartbeatWriter(const std::string& out_dir, int rank)
    : rank_(rank), latest_path_(rank_file(out_dir, rank, "json")) {
  fs::create_directories(heartbeat_dir(out_dir));
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  host_ = host;
  const std::string history = heartbeat_history_path(out_dir, rank);
  history_.reset(std::fopen(history.c_str(), "a"));
  ZAYA_CHECK(history_, "cannot open the heartbeat history '", history, "' for appending");
}

void HeartbeatWriter::beat(const Heartbeat& hb_in) {
  Heartbeat hb = hb_in;
  hb.rank = rank_;
  hb.host = host_;
  hb.pid = ::getpid();
  hb.time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string line = heartbeat_to_json(hb).dump();
  write_file_atomically(latest_path_, line + "\n");
  // One fputs + fflush per step: the line reaches the kernel whole (the supervisor only takes
  // lines that end in a newline), no fsync needed for a live reader.
  std::fputs((line + "\n").c_str(), history_.get());
  ZAYA_CHECK(std::fflush(history_.get()) == 0, "writing the heartbeat history of rank ", rank_,
             " failed (disk full?)");
}

void HeartbeatWriter::beat_step(int64_t step, double loss, double grad_norm, double step_time_s,
                                int64_t sample_begin, int64_t sample_end) {
  Heartbeat hb;
  hb.step = step;
  hb.loss = loss;
  hb.grad_norm = grad_norm;
  hb.step_time_s = step_time_s;
  hb.sample_begin = sample_begin;
  hb.sample_end = sample_end;
  hb.phase = BeatPhase::kStep;
  beat(hb);
}

void HeartbeatWriter::beat_phase(BeatPhase phase, int64_t step, int64_t g) {
  Heartbeat hb;
  hb.step = step;
  hb.sample_begin = hb.sample_end = g;
  hb.phase = phase;
  beat(hb);
}

}  // namespace zaya
