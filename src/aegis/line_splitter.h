// Splits the job's output stream into lines with bounded memory: a line longer than max_bytes is
// handed on as soon as its first max_bytes have arrived (marked cut) and the rest of it, up to
// its newline, is dropped. A job printing megabytes without a newline therefore costs the
// supervisor max_bytes, not the size of the line, and log rules see the line at once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace zaya::aegis {

struct OutputLine {
  std::string text;  // without its newline; at most max_bytes
  bool cut = false;  // the line was longer: text is its beginning
};

class LineSplitter {
 public:
  explicit LineSplitter(size_t max_bytes) : max_bytes_(max_bytes) {}
  // Appends a chunk of output; complete (or cut) lines go to `out`.
  void feed(std::string_view chunk, std::vector<OutputLine>& out);
  // End of output: the trailing partial line, if any.
  void finish(std::vector<OutputLine>& out);
  size_t buffered_bytes() const { return partial_.size(); }

 private:
  size_t max_bytes_;
  std::string partial_;    // the current line's bytes so far (at most max_bytes_)
  bool dropping_ = false;  // the current line was cut: skip to its newline
};

}  // namespace zaya::aegis
