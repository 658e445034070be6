#include "train/sampler.h"

#include "core/error.h"
#include "infer/generate.h"

namespace zaya {

std::vector<int32_t> generate(ZayaModel& model, std::vector<int32_t> tokens,
                              const SampleOptions& opt) {
  ZAYA_CHECK(!tokens.empty(), "generate: the prompt needs at least one token");
  GenerateOptions g;
  g.sampling.temperature = opt.temperature;
  g.sampling.top_k = opt.top_k;
  g.sampling.seed = opt.seed;
  g.max_new_tokens = opt.max_new_tokens;
  g.eos = opt.stop_token;
  g.drawable = opt.drawable;
  Decoder decoder(model);
  const GenerateResult r = generate_tokens(decoder, tokens, g);
  tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
  return tokens;
}

}  // namespace zaya
