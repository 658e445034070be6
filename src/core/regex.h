// <regex> for project code. GCC 12 reports a false -Wmaybe-uninitialized inside libstdc++'s
// <regex> (std::function moves in the NFA builder) when optimising with sanitizers; the warning is
// in the library, not in our code, so it is silenced here, once, for every user of std::regex.
#pragma once

// clang (the fuzz build) has no such warning and would reject the pragma as unknown.
#if defined(__clang__)
#include <regex>
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>
#pragma GCC diagnostic pop
#endif
