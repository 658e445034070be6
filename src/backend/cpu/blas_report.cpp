// backend/blas_report.h on the CPU backend's start-up (blas_startup.h).
#include "backend/blas_report.h"

#include "backend/cpu/blas_startup.h"

namespace zaya {

void prepare_blas(int argc, char** argv) {
  cpu::blas::prepare_blas(argc, argv);
}

const char* blas_kernels_flag_help() {
  return cpu::blas::kBlasKernelsFlagHelp;
}

std::string blas_summary_line() {
  return cpu::blas::blas_summary(cpu::blas::blas_state());
}

std::string blas_kernels() {
  return cpu::blas::blas_state().kernels;
}

nlohmann::json blas_json() {
  const cpu::blas::BlasState& blas = cpu::blas::blas_state();
  return {{"library", blas.library},
          {"kernels", blas.kernels},
          {"source", cpu::blas::source_name(blas.source)},
          {"library_choice", blas.library_choice},
          {"cpu_features", cpu::blas::describe(blas.cpu)},
          {"self_check", blas.checked ? (blas.check.ok ? "passed" : "failed") : "not run"}};
}

std::string blas_info_section() {
  return cpu::blas::format_blas_info(cpu::blas::blas_state());
}

}  // namespace zaya
