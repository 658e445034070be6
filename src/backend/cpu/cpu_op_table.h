// The CPU backend's ops as a table of functions, one table per vector path (vector_path.h): the
// same list as backend_ops.inc, each entry the path's cpu:: function of that name. CpuBackend
// forwards every op through the table of the path it was made for.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/cpu_path_target.h"

namespace zaya::cpu {

struct CpuOpTable {
#define ZAYA_BACKEND_OP(ret, name, params, args) ret(*name) params;
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP
};

ZAYA_CPU_PATH_BEGIN
// This compile's table: the plain one (the build's own instruction set), or in a path's compile
// that path's (zaya::cpu::avx2::op_table, ...).
const CpuOpTable& op_table();
ZAYA_CPU_PATH_END

}  // namespace zaya::cpu
