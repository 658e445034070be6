#include "aegis/line_splitter.h"

namespace zaya::aegis {

void LineSplitter::feed(std::string_view chunk, std::vector<OutputLine>& out) {
  while (!chunk.empty()) {
    const size_t nl = chunk.find('\n');
    const std::string_view piece = chunk.substr(0, nl);  // the whole chunk without a newline
    if (!dropping_) {
      const size_t room = max_bytes_ - partial_.size();
      partial_.append(piece.substr(0, room));
      if (piece.size() > room) {  // over the cap: hand the beginning on now, drop the rest
        out.push_back({std::move(partial_), true});
        partial_.clear();
        dropping_ = true;
      }
    }
    if (nl == std::string_view::npos) return;
    if (!dropping_) out.push_back({std::move(partial_), false});
    partial_.clear();
    dropping_ = false;
    chunk.remove_prefix(nl + 1);
  }
}

void LineSplitter::finish(std::vector<OutputLine>& out) {
  if (!partial_.empty()) out.push_back({std::move(partial_), false});
  partial_.clear();
  dropping_ = false;
}

}  // namespace zaya::aegis
