// zaya eval --tasks: lm-eval's context/continuation split, the task layouts and their errors, the
// metrics, and the decoder's continuation scores against one full forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include "core/error.h"
#include "decoder_test_util.h"
#include "eval/context_split.h"
#include "eval/task_eval.h"
#include "eval/task_file.h"
#include "eval/task_layouts.h"
#include "eval/task_metrics.h"
#include "eval/task_prompts.h"
#include "infer/continuation_scorer.h"
#include "tokenizer/bpe_trainer.h"

namespace zaya {
namespace {

// A tokenizer whose merges join letters across what a task splits: "Answer:", " B" and "abcd".
const BpeTokenizer& tokenizer() {
  static const BpeTokenizer t = [] {
    BpeTrainOptions opt;
    opt.vocab_size = 300;
    std::vector<std::string> texts;
    for (int i = 0; i < 50; ++i)
      texts.push_back("Answer: B. Answer: A. abcd abcd abcd xyzw xy xy  \n\n the cat sat");
    return train_bpe(texts, opt);
  }();
  return t;
}

std::vector<int32_t> ids(std::string_view text) {
  return tokenizer().encode(text);
}

TEST(ContextSplit, TrailingSpacesMoveToTheContinuation) {
  const ContextIds got = split_context_continuation(tokenizer(), "Answer: ", "B", 7);
  EXPECT_EQ(got.context, ids("Answer:"));
  const std::vector<int32_t> whole = ids("Answer: B");
  EXPECT_EQ(got.continuation,
            std::vector<int32_t>(whole.begin() + ptrdiff_t(ids("Answer:").size()), whole.end()));
  EXPECT_EQ(got.continuation, ids(" B"));
  // Newlines and tabs are whitespace to str.rstrip() too.
  const ContextIds nl = split_context_continuation(tokenizer(), "the cat\n\n \t", "sat", 7);
  EXPECT_EQ(nl.context, ids("the cat"));
  const std::vector<int32_t> all = ids("the cat\n\n \tsat");
  EXPECT_EQ(nl.continuation,
            std::vector<int32_t>(all.begin() + ptrdiff_t(nl.context.size()), all.end()));
}

TEST(ContextSplit, ContinuationMergingWithTheContextsLastToken) {
  // "ab" alone is one token sequence; "abcd" one token: the whole's ids do not start with the
  // context's, and lm-eval scores whole[len(ctx):] after ids(context) anyway.
  const std::vector<int32_t> ctx = ids("xy ab"), whole = ids("xy abcd");
  ASSERT_NE(std::vector<int32_t>(whole.begin(),
                                 whole.begin() + ptrdiff_t(std::min(ctx.size(), whole.size()))),
            ctx);
  if (whole.size() > ctx.size()) {
    const ContextIds got = split_context_continuation(tokenizer(), "xy ab", "cd", 7);
    EXPECT_EQ(got.context, ctx);
    EXPECT_EQ(got.continuation,
              std::vector<int32_t>(whole.begin() + ptrdiff_t(ctx.size()), whole.end()));
  } else {
    EXPECT_THROW(split_context_continuation(tokenizer(), "xy ab", "cd", 7), Error);
  }
  // A choice merging with the context's last token, with tokens left over: the merged token is
  // not scored again, the rest is.
  const std::vector<int32_t> w2 = ids("xy abcd xy");
  const ContextIds got2 = split_context_continuation(tokenizer(), "xy ab", "cd xy", 7);
  EXPECT_EQ(got2.context, ctx);
  EXPECT_EQ(got2.continuation, std::vector<int32_t>(w2.begin() + ptrdiff_t(ctx.size()), w2.end()));
  EXPECT_NE(got2.continuation, ids("cd xy"));
  EXPECT_FALSE(got2.continuation.empty());
}

TEST(ContextSplit, EmptyContextGetsThePrefixToken) {
  const ContextIds got = split_context_continuation(tokenizer(), "", " the cat", 299);
  EXPECT_EQ(got.context, std::vector<int32_t>{299});
  EXPECT_EQ(got.continuation, ids(" the cat"));
  // The continuation starting with the prefix token: that token becomes the context.
  const std::vector<int32_t> cat = ids(" the cat");
  const ContextIds same = split_context_continuation(tokenizer(), "", " the cat", cat[0]);
  EXPECT_EQ(same.context, std::vector<int32_t>{cat[0]});
  EXPECT_EQ(same.continuation, std::vector<int32_t>(cat.begin() + 1, cat.end()));
  EXPECT_EQ(loglikelihood_prefix_token(tokenizer()), *tokenizer().end_of_text_id());
}

TEST(ContextSplit, RstripAsPython) {
  EXPECT_EQ(rstripped_length("ab \t\n\r\v\f\x1c"), 2u);
  EXPECT_EQ(rstripped_length("ab\xc2\xa0 \xe3\x80\x80"), 2u);
  EXPECT_EQ(rstripped_length("   "), 0u);
  EXPECT_EQ(rstripped_length("a b"), 3u);
}

TEST(TaskLayouts, HellaSwagPreprocessing) {
  EXPECT_EQ(hellaswag_preprocess("  How to X [title] Do it [step] now.  "), "How to X. Do it now.");
  EXPECT_EQ(hellaswag_preprocess("a  b   c"), "a b  c");
  const nlohmann::json doc = {{"activity_label", "Roof shingle removal"},
                              {"ctx_a", "A man is sitting on a roof."},
                              {"ctx_b", "he"},
                              {"ctx", "ignored when the halves are there"},
                              {"endings", {"is using wrap.", "starts [header] pulling."}},
                              {"label", "1"}};
  ASSERT_EQ(detect_layout(doc), TaskLayout::kHellaSwag);
  const TaskItem item = item_from_json(TaskLayout::kHellaSwag, doc, "f:1");
  EXPECT_EQ(item.queries[0], "Roof shingle removal: A man is sitting on a roof. He");
  EXPECT_EQ(item.continuations[1], " starts pulling.");
  EXPECT_EQ(item.choices[1], "starts pulling.");
  EXPECT_EQ(item.gold, 1);
}

TEST(TaskLayouts, EveryLayoutsPrompts) {
  const TaskItem arc = item_from_json(TaskLayout::kArc,
                                      {{"question", "Which?"},
                                       {"choices", {{"text", {"x", "y"}}, {"label", {"A", "B"}}}},
                                       {"answerKey", "B"}},
                                      "f:1");
  EXPECT_EQ(arc.queries[0], "Question: Which?\nAnswer:");
  EXPECT_EQ(arc.gold, 1);
  const TaskItem mmlu = item_from_json(TaskLayout::kMmlu,
                                       {{"question", " Q? "},
                                        {"choices", {"u", "v"}},
                                        {"answer", 1},
                                        {"subject", "high_school_math"}},
                                       "f:1");
  EXPECT_EQ(mmlu.queries[0], "Q?\nA. u\nB. v\nAnswer:");
  EXPECT_EQ(mmlu.continuations, (std::vector<std::string>{" A", " B"}));
  EXPECT_EQ(
      mmlu.description,
      "The following are multiple choice questions (with answers) about high school math.\n\n");
  const TaskItem piqa = item_from_json(
      TaskLayout::kPiqa, {{"goal", "G"}, {"sol1", "s"}, {"sol2", "t"}, {"label", 0}}, "f:1");
  EXPECT_EQ(piqa.queries[1], "Question: G\nAnswer:");
  const TaskItem wg = item_from_json(TaskLayout::kWinogrande,
                                     {{"sentence", "Ann gave Bo a gift because _ was kind."},
                                      {"option1", "Ann"},
                                      {"option2", "Bo"},
                                      {"answer", "2"}},
                                     "f:1");
  EXPECT_EQ(wg.queries, (std::vector<std::string>{"Ann gave Bo a gift because Ann",
                                                  "Ann gave Bo a gift because Bo"}));
  EXPECT_EQ(wg.continuations[0], " was kind.");
  EXPECT_EQ(wg.gold, 1);
  const TaskItem lam = item_from_json(TaskLayout::kLambada, {{"text", "he ate the cake"}}, "f:1");
  EXPECT_EQ(lam.queries[0], "he ate the");
  EXPECT_EQ(lam.continuations[0], " cake");
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = (test::temp_dir("eval_tasks") / name).string();
  std::ofstream(path) << text;
  return path;
}

void expect_error(const std::string& text, const std::string& needle) {
  const std::string path = write_file("bad.jsonl", text);
  try {
    read_task_file(path);
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(TaskFile, BadInputNamesFileLineAndField) {
  const std::string ok = R"({"context": "c", "choices": ["a", "b"], "gold": 0})";
  expect_error(ok + "\n{\"foo\": 1}\n", ":2: missing field 'choices'");  // plain, from line 1
  expect_error("{\"foo\": 1}\n", ":1: unknown task layout");
  expect_error(ok + "\n{\"context\": \"c\", \"choices\": [\"a\"], \"gold\": 3}\n",
               ":2: field 'gold' = 3 is out of range");
  expect_error(R"({"context": "c", "choices": [], "gold": 0})",
               ":1: field 'choices' must be a non-empty list");
  expect_error(R"({"ctx": "c", "endings": ["a"], "label": ""})", ":1: field 'label'");
  expect_error("not json\n", ":1: not a JSON object");
  EXPECT_THROW(parse_layout("squad"), Error);
}

TEST(TaskPrompts, FewShotFromTheSameFileWithoutTheItem) {
  std::string text;
  for (int i = 0; i < 6; ++i)
    text +=
        R"({"context": "q)" + std::to_string(i) + R"(", "choices": ["a", "b"], "gold": 1})" + "\n";
  const Task task = read_task_file(write_file("shots.jsonl", text));
  for (size_t i = 0; i < 6; ++i) {
    const std::vector<size_t> ex = fewshot_examples(task, i, 5, 9);
    EXPECT_EQ(std::count(ex.begin(), ex.end(), i), 0);
    EXPECT_EQ(std::set<size_t>(ex.begin(), ex.end()).size(), 5u);
  }
  const auto p = item_prompts(task, 2, 1, 9);
  const size_t ex = fewshot_examples(task, 2, 1, 9)[0];
  EXPECT_EQ(p[0].first, "q" + std::to_string(ex) + " b\n\nq2");
  EXPECT_EQ(p[1].second, " b");
  EXPECT_THROW(fewshot_examples(task, 0, 6, 9), Error);
}

TEST(TaskMetrics, AccAccNormTiesAndStderr) {
  Task task;
  TaskItem item;
  item.choices = {"aaaa", "b", "cc"};
  item.queries.assign(3, "q");
  item.continuations = {" aaaa", " b", " cc"};
  item.gold = 1;
  task.items = {item, item};
  // Ties go to the first choice; acc_norm divides by characters.
  const ChoiceScores tie{{-2.0, -2.0, -3.0}, {false, false, false}};
  EXPECT_EQ(judge_item(task, item, tie).acc, 0.0);
  const ChoiceScores norm{{-4.0, -2.0, -1.0}, {false, false, false}};
  EXPECT_EQ(judge_item(task, item, norm).acc, 0.0);       // argmax -1.0: choice 2
  EXPECT_EQ(judge_item(task, item, norm).acc_norm, 0.0);  // -1, -2, -0.5: choice 2
  const ChoiceScores right{{-9.0, -1.0, -8.0}, {false, true, false}};
  const std::vector<ChoiceScores> scores = {right, norm};
  const nlohmann::json r = task_results_json(task, scores, 0)["results"][task.name];
  EXPECT_DOUBLE_EQ(r["acc,none"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r["acc_stderr,none"].get<double>(), std::sqrt(0.5) / std::sqrt(2.0));
  const std::vector<double> one = {1.0};
  EXPECT_TRUE(std::isnan(mean_stderr(one)));
}

// The decoder's continuation log-probabilities (shared prefill, forks, batched steps) against the
// log-softmax of one full forward over context + continuation.
TEST(ContinuationScorer, EqualsTheFullForward) {
  ZayaModel model = test::perturbed_tiny(5);
  const int V = int(model.config().vocab_size);
  const std::vector<int32_t> ctx = test::random_tokens(9, V, 1),
                             ctx2 = test::random_tokens(4, V, 2);
  std::vector<ContinuationRequest> rqs;
  for (int c = 0; c < 4; ++c) rqs.push_back({ctx, test::random_tokens(1 + c * 2, V, 10 + c)});
  for (int c = 0; c < 3; ++c) rqs.push_back({ctx2, test::random_tokens(3, V, 20 + c)});
  // And a greedy continuation: each token the argmax after the ones before.
  std::vector<int32_t> greedy_run = ctx2;
  for (int k = 0; k < 3; ++k) {
    model.forward(greedy_run, {}, 1, int(greedy_run.size()));
    const std::span<const float> last = model.logits().subspan((greedy_run.size() - 1) * size_t(V));
    greedy_run.push_back(int32_t(std::max_element(last.begin(), last.end()) - last.begin()));
  }
  rqs.push_back({ctx2, std::vector<int32_t>(greedy_run.begin() + 4, greedy_run.end())});
  const std::vector<ContinuationScore> got = score_continuations(model, rqs, 5);
  for (size_t i = 0; i < rqs.size(); ++i) {
    std::vector<int32_t> all = rqs[i].context;
    all.insert(all.end(), rqs[i].continuation.begin(), rqs[i].continuation.end());
    model.forward(all, {}, 1, int(all.size()));
    const std::span<const float> logits = model.logits();
    double want = 0;
    bool greedy = true;
    for (size_t k = 0; k < rqs[i].continuation.size(); ++k) {
      const size_t pos = rqs[i].context.size() - 1 + k;
      bool g = false;
      want += token_logprob(logits.subspan(pos * size_t(V), size_t(V)), rqs[i].continuation[k], &g);
      greedy = greedy && g;
    }
    EXPECT_NEAR(got[i].logprob, want, 1e-5 * std::abs(want)) << "request " << i;
    EXPECT_EQ(got[i].is_greedy, greedy) << "request " << i;
    EXPECT_EQ(got[i].token_logprobs.size(), rqs[i].continuation.size());
  }
  EXPECT_TRUE(got.back().is_greedy);
}

// A request's scores are the same bits whatever shares its decode steps: alone (one sequence at a
// time, each context prefilled for itself), in batches of several items' choices, which join
// and leave at different steps, and with the items in another order.
TEST(ContinuationScorer, AScoreDoesNotDependOnWhatSharesItsSteps) {
  ZayaModel model = test::perturbed_tiny(6);
  const int V = int(model.config().vocab_size);
  std::vector<ContinuationRequest> rqs;
  for (int item = 0; item < 5; ++item) {
    const std::vector<int32_t> ctx = test::random_tokens(3 + 2 * item, V, 30 + uint64_t(item));
    for (int c = 0; c < 3; ++c)
      rqs.push_back(
          {ctx, test::random_tokens(1 + (item + 2 * c) % 6, V, 40 + uint64_t(3 * item + c))});
  }
  const auto same = [&](const std::vector<ContinuationScore>& got, const std::vector<size_t>& order,
                        const std::vector<ContinuationScore>& want, const char* what) {
    for (size_t i = 0; i < order.size(); ++i) {
      const ContinuationScore &g = got[i], &w = want[order[i]];
      EXPECT_EQ(std::memcmp(&g.logprob, &w.logprob, sizeof(double)), 0) << what << " request " << i;
      ASSERT_EQ(g.token_logprobs.size(), w.token_logprobs.size()) << what << " request " << i;
      EXPECT_EQ(std::memcmp(g.token_logprobs.data(), w.token_logprobs.data(),
                            sizeof(double) * w.token_logprobs.size()),
                0)
          << what << " request " << i;
      EXPECT_EQ(g.is_greedy, w.is_greedy) << what << " request " << i;
    }
  };
  const std::vector<ContinuationScore> alone = score_continuations(model, rqs, 1);
  std::vector<size_t> identity(rqs.size());
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = i;
  for (const int batch : {2, 4, 7, 16})
    same(score_continuations(model, rqs, batch), identity, alone, "in order");
  // The items reversed (each item's choices stay together, so its context is still shared).
  std::vector<size_t> reversed;
  for (size_t item = 5; item-- > 0;)
    for (size_t c = 0; c < 3; ++c) reversed.push_back(3 * item + c);
  std::vector<ContinuationRequest> rq2;
  for (const size_t i : reversed) rq2.push_back(rqs[i]);
  same(score_continuations(model, rq2, 5), reversed, alone, "reversed");
}

// A task of `items` items of two choices on lines 1, 3, 5, ...: contexts of 5 tokens and
// continuations of 2, except `long_item`'s choice 1, of `long_tokens`.
PreparedTask two_choice_task(size_t items, size_t long_item, size_t long_tokens) {
  PreparedTask p;
  p.task.path = "tasks.jsonl";
  for (size_t i = 0; i < items; ++i) {
    TaskItem item;
    item.line = int(2 * i + 1);
    item.queries = {"q", "q"};
    item.continuations = item.choices = {"a", "b"};
    p.task.items.push_back(item);
    for (size_t c = 0; c < 2; ++c)
      p.requests.push_back({std::vector<int32_t>(5, 1),
                            std::vector<int32_t>(i == long_item && c == 1 ? long_tokens : 2, 2)});
  }
  p.items = items;
  return p;
}

// A choice longer than the context is refused before scoring with its file, line and choice,
// and the limit that stops short of it; a context longer than the model's is not (it is cut).
TEST(TaskChecks, AChoiceLongerThanTheContextNamesItsLine) {
  ModelConfig c = test::tiny_config();
  c.max_seq_len = 16;
  EXPECT_NO_THROW(check_task_fits_context(two_choice_task(4, 2, 16), c));
  const std::string e =
      test::error_of([&] { check_task_fits_context(two_choice_task(4, 2, 17), c); });
  EXPECT_NE(e.find("tasks.jsonl:5: choice 1 has 17 tokens, more than the model's context of 16"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("the 2 items before it fit ('limit' 2 stops short of it)"), std::string::npos)
      << e;
  PreparedTask long_context = two_choice_task(4, 9, 0);
  long_context.requests[3].context.assign(40, 1);
  EXPECT_NO_THROW(check_task_fits_context(long_context, c));
}

// The decoder's memory for a batch: no more sequences than the task's choices, each holding its
// cache blocks up to the longest request, its convolution states and three rows of logits. The
// largest batch that fits is named.
TEST(TaskChecks, TheBatchIsCheckedAgainstTheMemoryItImplies) {
  const ModelConfig c = test::tiny_config();
  const PreparedTask task = two_choice_task(10, 0, 2);  // 20 requests of 5 + 2 tokens
  EXPECT_EQ(scoring_memory(task, c, 2147483647).sequences, 20);
  EXPECT_EQ(scoring_memory(task, c, 3).sequences, 3);
  EXPECT_EQ(scoring_memory(task, c, 3).capacity, 6);  // 7 tokens, the last never fed
  // Written out from the shapes: 1 block of 16 positions per sequence (capacity 6), CCA's
  // compressed keys and values (2 × kv_dim floats) per position and attention stage; per slot the
  // convolution state (2 C + kv_dim / 2 floats per attention stage) and 3 × vocab floats.
  const int64_t stages = c.num_stages / 2, kv = c.num_kv_heads * c.head_dim;
  const int64_t channels = (c.num_q_heads + c.num_kv_heads) * c.head_dim;
  const int64_t per_sequence =
      16 * stages * 2 * kv * 4 + stages * (2 * channels + kv / 2) * 4 + 3 * c.vocab_size * 4;
  EXPECT_EQ(scoring_memory(task, c, 3).bytes, 3 * per_sequence);
  const PreparedTask tasks[] = {task};
  EXPECT_NO_THROW(check_scoring_memory(tasks, c, 3, 3 * per_sequence, "'eval.batch'"));
  const std::string e = test::error_of(
      [&] { check_scoring_memory(tasks, c, 2147483647, 3 * per_sequence, "'eval.batch'"); });
  EXPECT_NE(e.find("'eval.batch' 2147483647: scoring tasks.jsonl holds 20 sequences"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("a batch of at most 3 fits"), std::string::npos) << e;
  const std::string none =
      test::error_of([&] { check_scoring_memory(tasks, c, 1, per_sequence - 1, "--batch"); });
  EXPECT_NE(none.find("--batch 1: "), std::string::npos) << none;
  EXPECT_NE(none.find("not even a batch of 1 fits"), std::string::npos) << none;
}

}  // namespace
}  // namespace zaya
