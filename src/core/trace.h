// A trace of what a process does, as Chrome Trace Event spans (complete events, "ph": "X", in
// microseconds), which Perfetto (ui.perfetto.dev) and chrome://tracing load: `zaya train --trace
// FILE` (train/run_trace.h). Spans are kept only while a Recorder is active and enabled (the
// --trace-steps window); elsewhere a Span costs one atomic load. Like every tracing library's
// TRACE_EVENT, the active recorder is the process's one, so that the model, the optimizer and
// the communicators record without passing a recorder through every call.
//
// Recording never touches what a run computes: the losses and weights are the same bits with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace zaya::trace {

using Clock = std::chrono::steady_clock;

struct Event {
  std::string name;
  const char* category;  // a literal: "model", "step", "collective", ...
  Clock::time_point start, end;
  int thread;
  int64_t bytes;  // a collective's payload; -1 when none
};

class Recorder {
 public:
  // Becomes the process's active recorder (one at a time), disabled; times count from now (the
  // caller makes "now" the same moment on every rank: a barrier just before).
  Recorder();
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void set_enabled(bool on);
  bool enabled() const;
  // The events so far, as the JSON objects of a Chrome trace's "traceEvents" (pid = `process`),
  // with the names of the threads that recorded them.
  std::string events_json(int process) const;
  size_t size() const;

  void add(Event e);  // Span's

 private:
  Clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

// The active recorder when it is enabled, else nullptr.
Recorder* active();

// Names the calling thread in the trace ("train", "reduce-scatter").
void name_thread(const char* name);

// A span from its construction to its destruction, kept by the active recorder.
class Span {
 public:
  Span(std::string_view name, const char* category, int64_t bytes = -1);
  // The name made by name() only when recording (no string built otherwise).
  template <class MakeName>
  requires std::is_invocable_r_v<std::string, MakeName> Span(const char* category, MakeName&& name)
      : recorder_(active()) {
    if (recorder_) begin(name(), category, -1);
  }
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  void begin(std::string name, const char* category, int64_t bytes);
  Recorder* recorder_;
  Event event_;
};

// A span that has already happened (a part a clock measured), kept by the active recorder.
void record(std::string_view name, const char* category, Clock::time_point start,
            Clock::time_point end);

}  // namespace zaya::trace
