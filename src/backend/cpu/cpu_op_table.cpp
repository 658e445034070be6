#include "backend/cpu/cpu_op_table.h"

#include "backend/cpu/activation.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/bf16_ops.h"
#include "backend/cpu/cca_decode_ops.h"
#include "backend/cpu/conv.h"
#include "backend/cpu/decode_ops.h"
#include "backend/cpu/lm_head_loss.h"
#include "backend/cpu/loss.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/model_ops.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/optim_ops.h"
#include "backend/cpu/residual.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/rowwise.h"
#include "backend/cpu/typed_weights.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// Each entry calls its cpu:: namesake: in a path's compile the op headers declare that path's
// functions (cpu_path_target.h), except the products (matmul.h), which are OpenBLAS's on every
// path.
const CpuOpTable& op_table() {
  static const CpuOpTable table{
#define ZAYA_BACKEND_OP(ret, name, params, args) [] params -> ret { return cpu::name args; },
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP
  };
  return table;
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
