// The running process's BLAS: which OpenBLAS kernels it computes with, why, and whether they
// passed the self-check. OpenBLAS reads OPENBLAS_CORETYPE once, when the library loads, before
// main: so when zaya's decision (blas_kernels.h) differs from what the process was started with,
// prepare_blas sets the variable and re-executes the same binary with the same arguments, before
// MPI or anything else has started. The decision travels to that process (and to the processes it
// launches, aegis's jobs and mpirun's ranks) in ZAYA_BLAS_CHOICE beside OPENBLAS_CORETYPE.
#pragma once

#include <string>

#include "backend/cpu/blas_kernels.h"
#include "backend/cpu/blas_self_check.h"

namespace zaya::cpu::blas {

struct BlasState {
  std::string library;  // "OpenBLAS 0.3.21"
  std::string kernels;  // the cores the library runs (openblas_get_corename)
  KernelSource source = KernelSource::kLibrary;
  std::string library_choice;  // what OpenBLAS takes by itself; empty where unknown
  std::string request_name = "--blas-kernels";  // or ZAYA_BLAS_KERNELS
  CpuFeatures cpu;
  bool checked = false;  // the self-check ran (prepare_blas)
  SelfCheckResult check;
  double check_ms = 0.0;  // how long it took
};

// The first call of a zaya program's main (zaya, the test programs): reads --blas-kernels from
// argv (or ZAYA_BLAS_KERNELS), decides, re-executes the process when OPENBLAS_CORETYPE must change
// (this call then does not return), confirms the library took the kernels asked for, and runs the
// self-check. Throws zaya::Error, naming the kernels and OPENBLAS_CORETYPE, when a request is
// invalid or the library computes wrong products.
//
// Test hooks (environment): ZAYA_BLAS_TEST_LIBRARY_CHOICE=NAME makes zaya take NAME for the
// library's own choice and run it where the library would (the case of a CPU OpenBLAS does not
// know, on any machine); ZAYA_BLAS_TEST_WRONG_PRODUCT=1 makes the self-check's products wrong.
void prepare_blas(int argc, char** argv);

// The state prepare_blas left; without it (a program that did not call it), what the library
// runs, unchecked.
const BlasState& blas_state();

// "blas: OpenBLAS 0.3.21, SkylakeX kernels (chosen by zaya: OpenBLAS would take Prescott),
// self-check passed (16 products)" for logs.
std::string blas_summary(const BlasState& state);

// zaya info's section: the library, the kernels and why, the CPU's features, the self-check.
std::string format_blas_info(const BlasState& state);

// The help text of --blas-kernels.
extern const char* const kBlasKernelsFlagHelp;

}  // namespace zaya::cpu::blas
