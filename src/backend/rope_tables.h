// The tables of the partial rotary position embedding, on the host: the model computes them once
// per sequence length and each backend's rope_apply (backend_ops.inc) reads them, as they are or
// as device copies (backend/rope_tables.cpp).
#pragma once

namespace zaya {

// cos/sin tables [seq, rot/2] for positions 0..seq-1: inv_freq_i = 1 / theta^(2i/rot), computed in
// fp32 the way Hugging Face does (so the two agree to the last bit of the angle).
void rope_tables(float* cos_out, float* sin_out, int seq, int rot, float theta);

}  // namespace zaya
