#include "model/model_info.h"

#include <cstdio>
#include <sstream>
#include <string>

#include "model/params.h"

namespace zaya {

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return v < 0 ? "-" + out : out;
}

ModelInfo compute_model_info(const ModelConfig& c, int64_t seq) {
  ModelInfo m;
  const ParamRegistry reg(c);
  for (const ParamSpec& s : reg.specs()) {
    if (!s.trainable()) {
      m.buffer_params += s.numel;
      continue;
    }
    m.total_params += s.numel;
    if (s.expert >= 0) m.expert_params += s.numel;
  }
  m.embedding_params = c.vocab_size * c.hidden_size;
  m.non_embedding_params = m.total_params - m.embedding_params;
  m.active_non_embedding =
      m.non_embedding_params - m.expert_params / c.num_experts * (c.num_experts - 1);
  const double head = double(c.vocab_size) * double(c.hidden_size);
  const double attn = double(c.num_attention_stages()) * double(c.q_dim()) * double(seq);
  m.forward_flops_per_token = 2.0 * (double(m.active_non_embedding) + head) + 2.0 * attn;
  m.train_flops_per_token = 3.0 * m.forward_flops_per_token;
  m.kv_cache_values_per_token = c.num_attention_stages() * 2 * c.kv_dim();
  m.conv_state_values_per_seq = c.num_attention_stages() * (2 * c.conv_channels() + c.hidden_size);
  return m;
}

double recompute_flops_per_token(const ModelConfig& c, int64_t seq,
                                 const RecomputePlan& recompute) {
  const ParamRegistry reg(c);
  double flops = 0;
  for (const ParamSpec& s : reg.specs()) {
    if (!s.trainable() || s.stage < 0) continue;
    const bool attention = ModelConfig::is_attention_stage(s.stage);
    // One expert of X runs per token (the convention's "active").
    const double active = s.expert >= 0 ? double(s.numel) / double(c.num_experts) : double(s.numel);
    switch (recompute.for_stage(attention)) {
      case Recompute::kFull:
        flops += 2.0 * active;
        break;
      case Recompute::kSelective:
        if (attention && s.name.find(".conv_qk.") != std::string::npos) flops += 2.0 * active;
        break;
      case Recompute::kNone:
        break;
    }
  }
  if (recompute.attention == Recompute::kFull)
    flops += 2.0 * double(c.num_attention_stages()) * double(c.q_dim()) * double(seq);
  return flops;
}

static std::string flops_str(double f) {
  char b[64];
  if (f >= 1e9)
    std::snprintf(b, sizeof(b), "%.3f GFLOP", f / 1e9);
  else
    std::snprintf(b, sizeof(b), "%.3f MFLOP", f / 1e6);
  return b;
}

std::string format_model_info(const ModelConfig& c, int64_t seq) {
  const ModelInfo m = compute_model_info(c, seq);
  std::ostringstream os;
  char buf[160];
  auto line = [&](const char* label, const std::string& value) {
    std::snprintf(buf, sizeof(buf), "  %-34s %s\n", label, value.c_str());
    os << buf;
  };
  auto millions = [](double v) {
    char b[64];
    std::snprintf(b, sizeof(b), "%.1f M", v / 1e6);
    return std::string(b);
  };
  os << "model: " << c.num_stages << " stages (" << c.num_attention_stages() << " CCA + "
     << c.num_moe_stages() << " MoE), hidden " << c.hidden_size << ", " << c.num_q_heads << " q / "
     << c.num_kv_heads << " kv heads of " << c.head_dim << ", " << c.num_experts
     << " experts + skip (width " << c.expert_hidden << "), router " << c.router_dim << ", vocab "
     << c.vocab_size << "\n";
  os << "parameters:\n";
  line("total", with_commas(m.total_params) + "  (" + millions(double(m.total_params)) + ")");
  line("embedding (tied LM head)", with_commas(m.embedding_params));
  line("non-embedding", with_commas(m.non_embedding_params) + "  (" +
                            millions(double(m.non_embedding_params)) + ")");
  line("active non-embedding (top-1)", with_commas(m.active_non_embedding) + "  (" +
                                           millions(double(m.active_non_embedding)) + ")");
  line("plus buffers (routing biases)", with_commas(m.buffer_params) + " values, not trained");
  os << "compute per token at seq " << seq << ":\n";
  std::snprintf(buf, sizeof(buf), "%s forward, %s train (fwd+bwd)",
                flops_str(m.forward_flops_per_token).c_str(),
                flops_str(m.train_flops_per_token).c_str());
  line("FLOPs", buf);
  for (const Recompute r : {Recompute::kSelective, Recompute::kFull}) {
    const double extra = recompute_flops_per_token(c, seq, r);
    std::snprintf(buf, sizeof(buf), "+%s per token (+%.2f %%%s)", flops_str(extra).c_str(),
                  100.0 * extra / m.train_flops_per_token,
                  r == Recompute::kSelective
                      ? ": CCA's convolutions; the elementwise ops it repeats count for nothing"
                      : ": every stage's forward again");
    line(r == Recompute::kSelective ? "train.recompute selective" : "train.recompute full", buf);
  }
  os << "inference state:\n";
  std::snprintf(buf, sizeof(buf), "%s values = %s bytes bf16 (%.1f KiB), %s bytes fp32",
                with_commas(m.kv_cache_values_per_token).c_str(),
                with_commas(2 * m.kv_cache_values_per_token).c_str(),
                2.0 * double(m.kv_cache_values_per_token) / 1024.0,
                with_commas(4 * m.kv_cache_values_per_token).c_str());
  line("CCA KV cache per token", buf);
  std::snprintf(buf, sizeof(buf), "%s values (conv window 2×%lld + previous hidden state)",
                with_commas(m.conv_state_values_per_seq).c_str(), (long long)c.conv_channels());
  line("constant state per sequence", buf);
  return os.str();
}

}  // namespace zaya
