// The MoE block for decode rows: the math of moe_forward (moe.h) for the new token of each of n
// sequences, on the model's backend, with every product a Backend::rows_matmul_forward so that a
// row's result does not depend on the other rows (moe_forward's expert GEMMs run in tiles, where
// a token's rounding depends on the tokens routed before it). Tokens routed to one expert still
// share one pass over its weights.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/config.h"
#include "model/moe.h"

namespace zaya {

// out[n, E] = MoE(x[n, E]); state_out[n, R] receives the router state passed to the next MoE stage
// (state_in: the previous one's, nullptr at the first); routes[n] receives the choices. All in
// the backend's memory; the experts' row counts are read back once (Backend::to_host).
void moe_decode(const Backend& be, float* out, float* state_out, const float* x,
                const float* state_in, const MoeWeights& w, const ModelConfig& c, int n,
                Arena& arena, int32_t* routes);

}  // namespace zaya
