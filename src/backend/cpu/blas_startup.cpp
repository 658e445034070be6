#include "backend/cpu/blas_startup.h"

#include <unistd.h>

#include <cblas.h>
#include <omp.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace zaya::cpu::blas {

const char* const kBlasKernelsFlagHelp =
    "OpenBLAS kernels: auto (default: OpenBLAS's own choice, unless it falls below what the CPU "
    "runs, as Debian's OpenBLAS 0.3.21 does on CPUs newer than it, where zaya takes the best "
    "kernels the CPU runs; an OPENBLAS_CORETYPE in the environment is respected), library "
    "(OpenBLAS's own choice, zaya does not step in) or a core name (SkylakeX, Cooperlake, "
    "Haswell, Zen, Sandybridge, Prescott, ...). Also ZAYA_BLAS_KERNELS. Every process checks its "
    "products against float64 at start-up and refuses a BLAS that computes wrong ones";

namespace {

constexpr const char* kChoiceVariable = "ZAYA_BLAS_CHOICE";
constexpr const char* kReexecVariable = "ZAYA_BLAS_REEXEC";

BlasState& mutable_state() {
  static BlasState state;
  return state;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// ZAYA_BLAS_CHOICE: "CORETYPE|LIBRARY_CHOICE|USER_CORETYPE", written with the
// OPENBLAS_CORETYPE zaya set, so that the process it starts (and theirs) can tell zaya's setting
// from the user's and still knows the library's own choice and what the user had set.
struct Choice {
  std::string coretype, library_choice, user_coretype;
};

std::optional<Choice> read_choice() {
  const std::string text = env_or_empty(kChoiceVariable);
  if (text.empty()) return std::nullopt;
  std::vector<std::string> fields;
  std::stringstream in(text);
  for (std::string field; std::getline(in, field, '|');) fields.push_back(field);
  if (text.back() == '|') fields.emplace_back();
  if (fields.size() != 3) return std::nullopt;
  return Choice{fields[0], fields[1], fields[2]};
}

// The request: --blas-kernels among the options before the subcommand, else ZAYA_BLAS_KERNELS,
// else auto. Later arguments belong to the subcommand (aegis's job command may carry its own).
KernelRequest read_request(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--blas-kernels" && i + 1 < argc) return {argv[i + 1], false};
    if (arg.rfind("--blas-kernels=", 0) == 0)
      return {std::string(arg.substr(std::strlen("--blas-kernels="))), false};
    if (arg == "--threads") {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] != '-') break;
  }
  const std::string env = env_or_empty("ZAYA_BLAS_KERNELS");
  if (!env.empty()) return {env, true};
  return {};
}

std::string library_version() {
  std::istringstream config(openblas_get_config());
  std::string name, version;
  config >> name >> version;
  return name + " " + version;
}

// Sets OPENBLAS_CORETYPE (or clears it) and runs this program again with the same arguments.
[[noreturn]] void reexecute(const std::string& coretype, const std::string& library_choice,
                            const std::string& user_coretype, char** argv) {
  if (coretype.empty()) {
    ::unsetenv("OPENBLAS_CORETYPE");
    ::unsetenv(kChoiceVariable);
  } else {
    ::setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1);
    const std::string choice = coretype + "|" + library_choice + "|" + user_coretype;
    ::setenv(kChoiceVariable, choice.c_str(), 1);
  }
  ::setenv(kReexecVariable, "1", 1);
  ::execv("/proc/self/exe", argv);
  ZAYA_FAIL("blas: could not restart zaya with OPENBLAS_CORETYPE=", coretype, " (",
            std::strerror(errno),
            "); set OPENBLAS_CORETYPE yourself or pass --blas-kernels library");
}

void run_self_check(BlasState& state) {
  const bool wrong = !env_or_empty("ZAYA_BLAS_TEST_WRONG_PRODUCT").empty();
  const auto start = std::chrono::steady_clock::now();
  // On the calling thread, as each of cpu::gemm's tiles calls OpenBLAS: no OpenMP thread may start
  // before main is ready for it (zaya serve blocks its stop signals before its first thread, and
  // every later thread inherits the mask).
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  state.check =
      check_gemm([wrong](bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
                         int lda, const float* b, int ldb, float beta, float* c, int ldc) {
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        if (wrong && m > 16 && n > 16) c[size_t(m / 2) * ldc + n / 2] *= 1.001f;
      });
  omp_set_num_threads(threads);
  state.checked = true;
  state.check_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (state.check.ok) return;
  const std::string coretype = env_or_empty("OPENBLAS_CORETYPE");
  ZAYA_FAIL("blas: ", state.library, " computes wrong products with ",
            describe_source(state.source, state.kernels, state.library_choice, state.request_name),
            ", OPENBLAS_CORETYPE", coretype.empty() ? " unset" : "=" + coretype, ": ",
            state.check.failure,
            ". zaya refuses to compute with it. Choose other kernels with --blas-kernels NAME or "
            "OPENBLAS_CORETYPE (this CPU has ",
            describe(state.cpu),
            "; AVX-512 EPYCs need OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512)");
}

}  // namespace

void prepare_blas(int argc, char** argv) {
  BlasState& state = mutable_state();
  const bool reexecuted = !env_or_empty(kReexecVariable).empty();
  ::unsetenv(kReexecVariable);  // the processes this one starts may need their own restart
  state.cpu = read_cpu_features();
  const KernelRequest request = read_request(argc, argv);
  state.request_name = request.from_environment ? "ZAYA_BLAS_KERNELS" : "--blas-kernels";

  // Whose OPENBLAS_CORETYPE this process started with: zaya's (ZAYA_BLAS_CHOICE names it) or the
  // user's.
  const std::string coretype = env_or_empty("OPENBLAS_CORETYPE");
  const std::optional<Choice> choice = read_choice();
  const bool set_by_zaya =
      !coretype.empty() && choice && same_kernel_name(choice->coretype, coretype);
  std::optional<std::string> user_coretype;
  if (set_by_zaya && !choice->user_coretype.empty()) user_coretype = choice->user_coretype;
  if (!set_by_zaya && !coretype.empty()) user_coretype = coretype;

  const std::string simulated = env_or_empty("ZAYA_BLAS_TEST_LIBRARY_CHOICE");
  std::string library_choice;
  if (!simulated.empty())
    library_choice = simulated;
  else if (set_by_zaya)
    library_choice = choice->library_choice;
  else if (coretype.empty())
    library_choice = openblas_get_corename();

  const KernelDecision decision = decide_kernels(state.cpu, library_choice, user_coretype, request);
  // With the test hook, "the library's own choice" is the simulated one, and runs.
  const std::string wanted = decision.source == KernelSource::kLibrary && !simulated.empty()
                                 ? simulated
                                 : decision.coretype;
  if (!same_kernel_name(wanted, coretype)) {
    ZAYA_CHECK(!reexecuted, "blas: zaya restarted itself with OPENBLAS_CORETYPE=", coretype,
               " but now wants ", wanted.empty() ? "it unset" : wanted,
               " (ZAYA_BLAS_CHOICE=", env_or_empty(kChoiceVariable),
               "); set OPENBLAS_CORETYPE yourself or pass --blas-kernels library");
    reexecute(wanted, library_choice, user_coretype.value_or(""), argv);
  }

  state.library = library_version();
  state.kernels = openblas_get_corename();
  state.source = decision.source;
  state.library_choice = library_choice;
  // OpenBLAS takes a core it has no kernels for, or one the CPU cannot run, without a word.
  ZAYA_CHECK(wanted.empty() || same_kernel_name(wanted, state.kernels),
             "blas: OPENBLAS_CORETYPE=", wanted,
             decision.source == KernelSource::kEnvironment ? " (from the environment)" : "",
             " names no kernels ", state.library, " has for this CPU: it runs its ", state.kernels,
             " kernels instead. Unset it, or name one of ", known_kernel_names(),
             " that this CPU runs (it has ", describe(state.cpu), ")");
  run_self_check(state);
}

const BlasState& blas_state() {
  BlasState& state = mutable_state();
  if (state.kernels.empty()) {
    state.library = library_version();
    state.kernels = openblas_get_corename();
    state.cpu = read_cpu_features();
    if (!env_or_empty("OPENBLAS_CORETYPE").empty()) state.source = KernelSource::kEnvironment;
  }
  return state;
}

std::string blas_summary(const BlasState& state) {
  std::string out =
      "blas: " + state.library + ", " +
      describe_source(state.source, state.kernels, state.library_choice, state.request_name);
  if (state.checked)
    out += str_cat(", self-check passed (", state.check.products, " products, ",
                   state.check.entries, " entries against float64)");
  return out;
}

std::string format_blas_info(const BlasState& state) {
  std::ostringstream os;
  auto line = [&](const char* label, const std::string& value) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "  %-34s ", label);
    os << buf << value << "\n";
  };
  os << "this machine's BLAS:\n";
  line("library", state.library);
  line("kernels",
       describe_source(state.source, state.kernels, state.library_choice, state.request_name));
  line("CPU features", describe(state.cpu));
  const std::string best = best_kernels_for(state.cpu);
  line("best kernels for them", tier_of(state.kernels) == tier_of(best)
                                    ? best + " (the same tier as the kernels above)"
                                    : best);
  const std::string coretype = env_or_empty("OPENBLAS_CORETYPE");
  line("OPENBLAS_CORETYPE", coretype.empty() ? "unset" : coretype);
  if (state.checked) {
    char worst[32];
    std::snprintf(worst, sizeof(worst), "%.3f", state.check.worst_ratio);
    line("self-check", str_cat("passed: ", state.check.products, " products, ", state.check.entries,
                               " entries within fp32's error bound of float64 (worst ", worst,
                               " of it) in ", int(state.check_ms + 0.5), " ms"));
  } else {
    line("self-check", "not run");
  }
  return os.str();
}

}  // namespace zaya::cpu::blas
