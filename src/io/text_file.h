// Whole text files: reading one, and replacing one so that a concurrent reader never sees it half
// done (the text goes to a sibling PATH.tmp that is renamed over PATH; rename is atomic within
// one file system).
#pragma once

#include <string>

namespace zaya {

// durable = fsync the file before the rename (for state that must survive a machine crash, not
// for per-step heartbeats whose only reader is a live supervisor).
// The whole file; an error names it when it cannot be read.
std::string read_text_file(const std::string& path);

void write_file_atomically(const std::string& path, const std::string& text, bool durable = false);

}  // namespace zaya
