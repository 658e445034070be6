// The list of input files a command reads: each argument is a file, a directory (every input file
// below it, recursively, in path order) or a glob pattern (matches in path order). Arguments keep
// their order; the result is deterministic for a given tree.
#pragma once

#include <string>
#include <vector>

namespace zaya {

// Whether a file name looks like an input (.txt, .text, .md, .jsonl, .json, .ndjson, each
// optionally followed by .gz, .zst or .zstd, or a bare .gz/.zst/.zstd): what a directory
// contributes. Files named explicitly are read whatever their name.
bool has_input_file_name(const std::string& path);

// Throws zaya::Error unless `path` is a regular file (a symbolic link to one is): a device such as
// /dev/zero never ends, a FIFO blocks, a directory holds no bytes. The message names `flag` (when
// given), the path and what is there instead.
void require_regular_file(const std::string& path, const char* flag = nullptr);

// Errors name the argument and `flag`: a missing file, a glob with no match, a directory with no
// input file in it, a special file (a device, a FIFO, a socket).
std::vector<std::string> expand_input_paths(const std::vector<std::string>& args,
                                            const char* flag = "--input");

}  // namespace zaya
