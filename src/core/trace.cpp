#include "core/trace.h"

#include <atomic>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya::trace {

namespace {

std::atomic<Recorder*> g_active{nullptr};
std::atomic<bool> g_enabled{false};
std::atomic<int> g_next_thread{0};
std::mutex g_names_mutex;
std::map<int, std::string>& thread_names() {
  static std::map<int, std::string> names;
  return names;
}

int this_thread() {
  thread_local const int id = g_next_thread.fetch_add(1);
  return id;
}

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace

Recorder::Recorder() : origin_(Clock::now()) {
  Recorder* none = nullptr;
  ZAYA_CHECK(g_active.compare_exchange_strong(none, this),
             "trace: a recorder is already active in this process");
}

Recorder::~Recorder() {
  g_enabled = false;
  g_active = nullptr;
}

void Recorder::set_enabled(bool on) {
  g_enabled = on;
}

bool Recorder::enabled() const {
  return g_enabled;
}

void Recorder::add(Event e) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(e));
}

size_t Recorder::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

std::string Recorder::events_json(int process) const {
  std::string out;
  auto append = [&](const nlohmann::json& j) {
    if (!out.empty()) out += ",\n";
    out += j.dump();
  };
  append({{"name", "process_name"},
          {"ph", "M"},
          {"pid", process},
          {"args", {{"name", "rank " + std::to_string(process)}}}});
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<int, bool> threads;
  for (const Event& e : events_) {
    nlohmann::json j = {{"name", e.name},
                        {"cat", e.category},
                        {"ph", "X"},
                        {"pid", process},
                        {"tid", e.thread},
                        {"ts", micros(e.start - origin_)},
                        {"dur", micros(e.end - e.start)}};
    if (e.bytes >= 0) j["args"] = {{"bytes", e.bytes}};
    append(j);
    threads[e.thread] = true;
  }
  std::lock_guard<std::mutex> names_lock(g_names_mutex);
  for (const auto& [thread, seen] : threads) {
    const auto it = thread_names().find(thread);
    append({{"name", "thread_name"},
            {"ph", "M"},
            {"pid", process},
            {"tid", thread},
            {"args",
             {{"name",
               it == thread_names().end() ? "thread " + std::to_string(thread) : it->second}}}});
  }
  return out;
}

Recorder* active() {
  return g_enabled.load(std::memory_order_relaxed) ? g_active.load() : nullptr;
}

void name_thread(const char* name) {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  thread_names()[this_thread()] = name;
}

Span::Span(std::string_view name, const char* category, int64_t bytes) : recorder_(active()) {
  if (recorder_) begin(std::string(name), category, bytes);
}

void Span::begin(std::string name, const char* category, int64_t bytes) {
  event_ = Event{std::move(name), category, Clock::now(), {}, this_thread(), bytes};
}

Span::~Span() {
  if (!recorder_) return;
  event_.end = Clock::now();
  recorder_->add(std::move(event_));
}

void record(std::string_view name, const char* category, Clock::time_point start,
            Clock::time_point end) {
  if (Recorder* r = active())
    r->add(Event{std::string(name), category, start, end, this_thread(), -1});
}

}  // namespace zaya::trace
