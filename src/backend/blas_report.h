// The process's BLAS as the layers above the backend see it: what backend/cpu/blas_startup.h
// chose and checked before anything computed, as one log line, a JSON object for summaries and
// benchmark records, the kernels' name, and `zaya info`'s section; and the start-up itself for
// the programs' main. The one door to it above the backend (nothing there calls cpu::).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace zaya {

// Chooses and checks the BLAS kernels (re-executing the process when they change); the first
// call of main. See backend/cpu/blas_startup.h.
void prepare_blas(int argc, char** argv);
// `--blas-kernels`'s help text.
const char* blas_kernels_flag_help();

// "blas: OpenBLAS 0.3.21, SkylakeX kernels (chosen by zaya: ...), self-check passed (...)".
std::string blas_summary_line();
// The kernels' name ("SkylakeX").
std::string blas_kernels();
// library, kernels, source, library_choice, cpu_features, self_check.
nlohmann::json blas_json();
// `zaya info`'s section "this machine's BLAS".
std::string blas_info_section();

}  // namespace zaya
