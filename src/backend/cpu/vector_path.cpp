#include "backend/vector_path.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>

#include "backend/cpu/blas_kernels.h"
#include "core/error.h"

namespace zaya {

const char* const kVectorPathFlagHelp =
    "vector path of the CPU kernels: auto (the best this CPU runs), avx512, avx2 or baseline; "
    "every path computes the same bits (also ZAYA_VECTOR_PATH)";

namespace {

constexpr VectorPath kAllPaths[] = {VectorPath::kBaseline, VectorPath::kAvx2, VectorPath::kAvx512};

// What the build compiled its plain code for (the compiler's own macros).
constexpr VectorPath kOwnPath =
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__) && defined(__AVX512CD__) && defined(__AVX2__) && defined(__FMA__)
    VectorPath::kAvx512;
#elif defined(__AVX2__) && defined(__FMA__)
    VectorPath::kAvx2;
#else
    VectorPath::kBaseline;
#endif

bool built(VectorPath path) {
  if (path == kOwnPath) return true;
#if defined(ZAYA_CPU_PATH_CLONE_AVX2)
  if (path == VectorPath::kAvx2) return true;
#endif
#if defined(ZAYA_CPU_PATH_CLONE_AVX512)
  if (path == VectorPath::kAvx512) return true;
#endif
  return false;
}

// The CPU's features by name; ZAYA_TEST_CPU_LACKS="avx512bw fma" hides some (tests of a CPU
// without a path, on any machine).
bool cpu_has(const cpu::blas::CpuFeatures& f, const std::string& name) {
  if (const char* hidden = std::getenv("ZAYA_TEST_CPU_LACKS")) {
    std::istringstream words(hidden);
    for (std::string word; words >> word;)
      if (word == name) return false;
  }
  if (name == "avx") return f.avx;
  if (name == "avx2") return f.avx2;
  if (name == "fma") return f.fma;
  if (name == "avx512f") return f.avx512f;
  if (name == "avx512bw") return f.avx512bw;
  if (name == "avx512dq") return f.avx512dq;
  if (name == "avx512vl") return f.avx512vl;
  if (name == "avx512cd") return f.avx512cd;
  return false;
}

// The features a path's code may use: cpu_path_target.h's target lists.
std::vector<std::string> needed_features(VectorPath path) {
  switch (path) {
    case VectorPath::kBaseline:
      return {};
    case VectorPath::kAvx2:
      return {"avx", "avx2", "fma"};
    case VectorPath::kAvx512:
      return {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"};
  }
  return {};
}

std::optional<VectorPath> parse_path(const std::string& name) {
  for (VectorPath path : kAllPaths)
    if (name == vector_path_name(path)) return path;
  return std::nullopt;
}

VectorPathChoice auto_choice() {
  VectorPathChoice choice;
  choice.path = kOwnPath;
  for (VectorPath path : built_vector_paths())
    if (missing_cpu_features(path).empty()) choice.path = path;
  choice.why = "auto: the best of this binary's paths that this CPU runs";
  return choice;
}

std::mutex g_mutex;
std::optional<VectorPathChoice> g_active;

#if defined(__x86_64__) && (defined(__AVX2__) || defined(__AVX512F__))
// A binary whose plain code needs AVX2 (-march=x86-64-v3, native), started on a CPU without it,
// would die of an illegal instruction somewhere in its start-up. This runs before the program's
// own static initialisers (priority 101), is compiled for any x86-64 whatever the build's -march,
// and calls only libgcc's feature test, the environment and write(2): it names what is missing
// and ends the process instead. ZAYA_TEST_CPU_LACKS hides features as in cpu_has.
__attribute__((constructor(101), target("arch=x86-64"))) void refuse_a_cpu_below_the_build() {
  __builtin_cpu_init();
  // (No string function of libc: their inline wrappers are compiled for the build's -march.)
  const char* hidden = std::getenv("ZAYA_TEST_CPU_LACKS");
  bool hides_avx2 = false;
  for (const char* c = hidden; c != nullptr && *c != '\0' && !hides_avx2; ++c)
    hides_avx2 = c[0] == 'a' && c[1] == 'v' && c[2] == 'x' && c[3] == '2';
  if (!hides_avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return;
  static const char kMessage[] =
      "zaya: error: this zaya was built for CPUs with AVX2 and FMA (-march), which this CPU "
      "lacks; build it with the default preset, which runs on any x86-64\n";
  const ssize_t written = write(2, kMessage, sizeof kMessage - 1);
  (void)written;
  _exit(1);
}
#endif

}  // namespace

const char* vector_path_name(VectorPath path) {
  switch (path) {
    case VectorPath::kBaseline:
      return "baseline";
    case VectorPath::kAvx2:
      return "avx2";
    case VectorPath::kAvx512:
      return "avx512";
  }
  return "?";
}

VectorPath own_vector_path() {
  return kOwnPath;
}

std::vector<VectorPath> built_vector_paths() {
  std::vector<VectorPath> paths;
  for (VectorPath path : kAllPaths)
    if (built(path)) paths.push_back(path);
  return paths;
}

std::string built_vector_paths_text() {
  std::string text;
  for (VectorPath path : built_vector_paths())
    text += (text.empty() ? "" : ", ") + std::string(vector_path_name(path));
  return text;
}

std::string missing_cpu_features(VectorPath path) {
  const cpu::blas::CpuFeatures features = cpu::blas::read_cpu_features();
  std::string missing;
  for (const std::string& name : needed_features(path))
    if (!cpu_has(features, name)) missing += (missing.empty() ? "" : " ") + name;
  return missing;
}

VectorPathChoice choose_vector_path(const std::string& request, const std::string& source) {
  if (request == "auto") return auto_choice();
  const std::optional<VectorPath> path = parse_path(request);
  if (!path)
    ZAYA_FAIL(source, ": unknown vector path '", request,
              "' (expected auto, avx512, avx2 or baseline)");
  if (!built(*path))
    ZAYA_FAIL(source, ": the ", request, " vector path is not in this binary (it carries ",
              built_vector_paths_text(), "; a portable build carries every path)");
  const std::string missing = missing_cpu_features(*path);
  if (!missing.empty())
    ZAYA_FAIL(source, ": the ", request, " vector path needs ", missing,
              ", which this CPU lacks (auto takes the best path it runs)");
  VectorPathChoice choice;
  choice.path = *path;
  choice.requested = true;
  choice.why = "requested by " + source;
  return choice;
}

void set_active_vector_path(const VectorPathChoice& choice) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_active = choice;
}

VectorPathChoice active_vector_path() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_active) {
    const char* env = std::getenv("ZAYA_VECTOR_PATH");
    g_active = env != nullptr && *env != '\0' ? choose_vector_path(env, "ZAYA_VECTOR_PATH")
                                              : auto_choice();
  }
  return *g_active;
}

std::string vector_path_summary_line() {
  const VectorPathChoice choice = active_vector_path();
  return str_cat("cpu vector path: ", vector_path_name(choice.path), " (", choice.why,
                 "; this binary carries ", built_vector_paths_text(), ")");
}

std::string format_vector_path_info() {
  const VectorPathChoice choice = active_vector_path();
  std::string out = "CPU vector paths\n";
  out += str_cat("  in this binary:   ", built_vector_paths_text(), " (built for ",
                 vector_path_name(kOwnPath), ")\n");
  std::string runs;
  for (VectorPath path : built_vector_paths()) {
    const std::string missing = missing_cpu_features(path);
    runs += str_cat("  ", vector_path_name(path), ": ",
                    missing.empty() ? std::string("this CPU runs it") : "this CPU lacks " + missing,
                    "\n");
  }
  out += runs;
  out += str_cat("  chosen:           ", vector_path_name(choice.path), " (", choice.why, ")\n");
  out += str_cat(
      "  elementwise ops, norms, softmax, attention, convolutions, losses, optimizer, "
      "decode products: ",
      vector_path_name(choice.path), "\n");
  out += "  products (GEMM):  OpenBLAS's kernels on every path (see BLAS above)\n";
  return out;
}

}  // namespace zaya
