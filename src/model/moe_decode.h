// The MoE block for decode rows: the math of moe_forward (moe.h) for the new token of each of n
// sequences, with every product a cpu::rows_matmul_forward so that a row's result does not depend
// on the other rows (moe_forward's expert GEMMs run in 64-row tiles, where a token's rounding
// depends on the tokens routed before it). Tokens routed to one expert still share one pass over
// its weights.
#pragma once

#include <cstdint>

#include "core/arena.h"
#include "model/config.h"
#include "model/moe.h"

namespace zaya {

// out[n, E] = MoE(x[n, E]); state_out[n, R] receives the router state passed to the next MoE stage
// (state_in: the previous one's, nullptr at the first). routes[n] (optional) receives the choices.
void moe_decode(float* out, float* state_out, const float* x, const float* state_in,
                const MoeWeights& w, const ModelConfig& c, int n, Arena& arena,
                int32_t* routes = nullptr);

}  // namespace zaya
