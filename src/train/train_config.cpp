#include "train/train_config.h"

#include "core/error.h"
#include "core/json_number.h"

namespace zaya {

namespace {

// train.recompute: "none", "selective" or "full"; true and false (the field's older form) are
// "full" and "none"; or {"attention": MODE, "moe": MODE}, each kind of stage its own (absent:
// "none").
Recompute parse_recompute(const nlohmann::json& v, const std::string& what);

RecomputePlan parse_recompute_plan(const nlohmann::json& v, const std::string& what) {
  if (!v.is_object()) return parse_recompute(v, what);
  RecomputePlan plan;
  for (const auto& [key, mode] : v.items()) {
    ZAYA_CHECK(key == "attention" || key == "moe", what, ": unknown stage kind '", key,
               "' (known: attention, moe)");
    (key == "attention" ? plan.attention : plan.moe) = parse_recompute(mode, what + "." + key);
  }
  return plan;
}

Recompute parse_recompute(const nlohmann::json& v, const std::string& what) {
  if (v.is_boolean()) return v.get<bool>() ? Recompute::kFull : Recompute::kNone;
  std::string known;
  for (const auto& [name, mode] : recompute_names()) known += (known.empty() ? "" : ", ") + name;
  ZAYA_CHECK(v.is_string(), what, " must be one of ", known, " (or true / false), got ", v.dump());
  const auto it = recompute_names().find(v.get<std::string>());
  ZAYA_CHECK(it != recompute_names().end(), what, " must be one of ", known, ", got ", v.dump());
  return it->second;
}

}  // namespace

TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& where) {
  ZAYA_CHECK(j.is_object(), where, ": 'train' must be a JSON object");
  TrainConfig c;
  for (const auto& item : j.items()) {
    // Named copies, not a structured binding: lambdas below capture them (clang < 16 cannot
    // capture structured bindings, and the fuzz build uses clang 14).
    const std::string key = item.key();
    const nlohmann::json& v = item.value();
    const std::string field = "'train." + key + "'";
    auto integer = [&](auto& dst, int64_t lo) {
      using T = std::remove_reference_t<decltype(dst)>;
      dst = json_integer_as<T>(v, lo, where + ": field " + field);
    };
    if (key == "seed")
      integer(c.seed, 0);
    else if (key == "micro_batch")
      integer(c.micro_batch, 1);
    else if (key == "global_batch")
      integer(c.global_batch, 1);
    else if (key == "max_steps")
      integer(c.max_steps, 0);
    else if (key == "eval_every")
      integer(c.eval_every, 1);
    else if (key == "eval_windows")
      integer(c.eval_windows, 1);
    else if (key == "log_every")
      integer(c.log_every, 1);
    else if (key == "sample_tokens")
      integer(c.sample_tokens, 0);
    else if (key == "checkpoint_every")
      integer(c.checkpoint_every, 0);
    else if (key == "keep_last")
      integer(c.keep_last, 1);
    else if (key == "keep_every")
      integer(c.keep_every, 0);
    else if (key == "sample_top_k")
      integer(c.sample_top_k, 0);
    else if (key == "lm_head_chunk_tokens")
      integer(c.lm_head_chunk_tokens, 0);
    else if (key == "lm_head_chunk_vocab")
      integer(c.lm_head_chunk_vocab, 0);
    else if (key == "context_parallel")
      integer(c.context_parallel, 1);
    else if (key == "zero1_bucket_floats")
      integer(c.zero1_bucket_floats, 1);
    else if (key == "zero_stage") {
      integer(c.zero_stage, 1);
      ZAYA_CHECK(c.zero_stage <= 2, where, ": field ", field,
                 " must be 1 (ZeRO-1) or 2 (ZeRO-2), got ", c.zero_stage);
    } else if (key == "overlap_reduce") {
      ZAYA_CHECK(v.is_boolean(), where, ": field ", field, " must be true or false, got ",
                 v.dump());
      c.overlap_reduce = v.get<bool>();
    } else if (key == "recompute") {
      c.recompute = parse_recompute_plan(v, where + ": field " + field);
    } else if (key == "out_dir" || key == "tokenizer") {
      ZAYA_CHECK(v.is_string(), where, ": field ", field, " must be a string");
      (key == "out_dir" ? c.out_dir : c.tokenizer) = v.get<std::string>();
    } else if (key == "sample_temperature") {
      c.sample_temperature = float(json_finite(v, 0.0, 100.0, where + ": field " + field));
    } else if (key == "sample_prompts") {
      ZAYA_CHECK(v.is_array(), where, ": field ", field, " must be a list of strings");
      c.sample_prompts.clear();
      for (const auto& p : v) {
        ZAYA_CHECK(p.is_string(), where, ": field ", field, " must be a list of strings");
        c.sample_prompts.push_back(p.get<std::string>());
      }
    } else if (key == "optim") {
      ZAYA_CHECK(v.is_object(), where, ": field ", field, " must be an object");
      c.optim = v;
    } else {
      ZAYA_FAIL(
          where, ": unknown field ", field,
          " (known: seed, micro_batch, global_batch, max_steps, eval_every, eval_windows, "
          "log_every, out_dir, tokenizer, sample_tokens, sample_temperature, sample_top_k, "
          "sample_prompts, checkpoint_every, keep_last, keep_every, lm_head_chunk_tokens, "
          "lm_head_chunk_vocab, context_parallel, recompute, overlap_reduce, zero1_bucket_floats, "
          "zero_stage, optim)");
    }
  }
  ZAYA_CHECK((c.lm_head_chunk_tokens > 0) == (c.lm_head_chunk_vocab > 0), where,
             ": 'train.lm_head_chunk_tokens' and 'train.lm_head_chunk_vocab' are both set (> 0) "
             "or both 0 (materialised logits), got ",
             c.lm_head_chunk_tokens, " and ", c.lm_head_chunk_vocab);
  ZAYA_CHECK(c.global_batch % c.micro_batch == 0, where, ": 'train.global_batch' (", c.global_batch,
             ") must be a multiple of 'train.micro_batch' (", c.micro_batch, ")");
  return c;
}

}  // namespace zaya
