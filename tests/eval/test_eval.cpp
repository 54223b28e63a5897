// The evaluation library on hand-computable cases: lm-eval rolling windows, word/byte normalizations, standard
// errors, paired tests, KL divergence and its file, task parsing, acc/acc_norm, and the batched scorer with
// shared-context prefill against plain one-sequence forwards.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "eval/evaluator.h"
#include "eval/kl_divergence.h"
#include "eval/loglikelihood.h"
#include "eval/metrics.h"
#include "eval/perplexity.h"
#include "eval/rolling_perplexity.h"
#include "eval/tasks.h"
#include "model/loader.h"
#include "kv/block_allocator.h"
#include "engine/sampler.h"
#include "test_util.h"

using namespace tritium;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tritium_test_eval_" + name)).string();
}

using Ids = std::vector<int32_t>;

}  // namespace

TEST(RollingWindows, MatchLmEvalContextLenOne) {
  const Ids t = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const auto w = rolling_windows(t, 0, 4);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].context, (Ids{0}));
  EXPECT_EQ(w[0].continuation, (Ids{1, 2, 3, 4}));
  EXPECT_EQ(w[1].context, (Ids{4}));
  EXPECT_EQ(w[1].continuation, (Ids{5, 6, 7, 8}));
  EXPECT_EQ(w[2].context, (Ids{6, 7, 8}));
  EXPECT_EQ(w[2].continuation, (Ids{9, 10}));
}

TEST(RollingWindows, LongerContextAndShortText) {
  const Ids t = {1, 2, 3, 4, 5, 6, 7};
  // context_len 2: pred_len = 3 after the first window.
  const auto w = rolling_windows(t, 9, 4, 2);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].context, (Ids{9}));
  EXPECT_EQ(w[0].continuation, (Ids{1, 2, 3, 4}));
  EXPECT_EQ(w[1].context, (Ids{3, 4}));
  EXPECT_EQ(w[1].continuation, (Ids{5, 6, 7}));
  const auto w3 = rolling_windows(Ids{1, 2, 3, 4, 5, 6, 7, 8}, 9, 4, 2);
  ASSERT_EQ(w3.size(), 3u);
  EXPECT_EQ(w3[2].context, (Ids{4, 5, 6, 7}));
  EXPECT_EQ(w3[2].continuation, (Ids{8}));
  // Fewer tokens than one window: a single window predicting all.
  const auto s = rolling_windows(Ids{5, 6}, 0, 8);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].context, (Ids{0}));
  EXPECT_EQ(s[0].continuation, (Ids{5, 6}));
  EXPECT_TRUE(rolling_windows(Ids{}, 0, 8).empty());
  EXPECT_THROW(rolling_windows(t, 0, 4, 5), Error);
  // Every token predicted exactly once, inputs never longer than the window.
  Ids many(1000);
  for (int i = 0; i < 1000; ++i) many[i] = i;
  size_t predicted = 0;
  for (const auto& win : rolling_windows(many, -1, 64)) {
    EXPECT_EQ(win.continuation.front(), static_cast<int32_t>(predicted));
    predicted += win.continuation.size();
    EXPECT_LE(win.context.size() + win.continuation.size(), 65u);
  }
  EXPECT_EQ(predicted, 1000u);
}

TEST(RollingMetrics, WordsBytesAndBitsPerByte) {
  EXPECT_EQ(count_words_lm_eval("a b"), 2);
  EXPECT_EQ(count_words_lm_eval(" a  b\n"), 4);  // re.split(r"\s+", " a  b\n") == ['', 'a', 'b', '']
  EXPECT_EQ(count_words_lm_eval(""), 1);
  EXPECT_EQ(count_words_lm_eval("a\xc2\xa0" "b"), 2);        // U+00A0 is whitespace to Python
  EXPECT_EQ(count_words_lm_eval("a\xef\xbb\xbf" "b"), 1);    // U+FEFF is not
  EXPECT_EQ(count_words_lm_eval("a\xe3\x80\x80" "b\tc"), 3);  // U+3000 ideographic space
  const RollingPerplexityResult r = rolling_metrics(-10.0, 5, "ab cd");
  EXPECT_EQ(r.words, 2);
  EXPECT_EQ(r.bytes, 5);
  EXPECT_NEAR(r.token_perplexity, std::exp(2.0), 1e-9);
  EXPECT_NEAR(r.word_perplexity, std::exp(5.0), 1e-9);
  EXPECT_NEAR(r.byte_perplexity, std::exp(2.0), 1e-9);
  EXPECT_NEAR(r.bits_per_byte, 2.0 / std::log(2.0), 1e-12);
  // Bytes are UTF-8 bytes, not characters: "é" is 2 bytes.
  EXPECT_EQ(rolling_metrics(-1.0, 1, "\xc3\xa9").bytes, 2);
}

TEST(Metrics, StderrAndPerplexityDeltaMethod) {
  const std::vector<double> x = {1, 0, 1, 1};
  EXPECT_DOUBLE_EQ(sample_mean(x), 0.75);
  EXPECT_NEAR(stderr_of_mean(x), std::sqrt(0.75 * 0.25 / 3), 1e-15);
  EXPECT_EQ(stderr_of_mean(std::vector<double>{3.0}), 0.0);
  const std::vector<double> ll = {-1.0, -3.0};
  const PerplexityEstimate p = perplexity_from_loglikelihoods(ll);
  EXPECT_NEAR(p.value, std::exp(2.0), 1e-12);
  EXPECT_NEAR(p.std_error, std::exp(2.0) * 1.0, 1e-12);  // sd = sqrt(2), / sqrt(2)
}

TEST(Metrics, PairedTestAndMcNemar) {
  EXPECT_NEAR(mcnemar_exact_p(0, 5), 2 * std::pow(0.5, 5), 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(3, 3), 1.0, 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(1, 9), 2 * (1.0 + 10.0) / 1024.0, 1e-12);
  EXPECT_EQ(mcnemar_exact_p(0, 0), 1.0);
  EXPECT_NEAR(normal_two_sided_p(1.959963985), 0.05, 1e-8);
  const std::vector<double> a = {1, 0, 1, 0}, b = {1, 1, 1, 1};
  const PairedTest t = paired_test(a, b, true);
  EXPECT_EQ(t.n, 4);
  EXPECT_DOUBLE_EQ(t.diff, 0.5);
  EXPECT_NEAR(t.diff_stderr, std::sqrt(1.0 / 3.0) / 2.0, 1e-12);
  EXPECT_NEAR(t.z, 0.5 / (std::sqrt(1.0 / 3.0) / 2.0), 1e-9);
  EXPECT_EQ(t.a_only, 0);
  EXPECT_EQ(t.b_only, 2);
  EXPECT_NEAR(t.mcnemar_p, 0.5, 1e-12);
  const PairedTest same = paired_test(a, a, true);
  EXPECT_EQ(same.diff, 0.0);
  EXPECT_EQ(same.p_value, 1.0);
  EXPECT_THROW(paired_test(a, std::vector<double>{1.0}, true), Error);
}

TEST(KlDivergence, HandComputedCases) {
  const std::vector<double> p = {std::log(0.5), std::log(0.5)}, q = {std::log(0.25), std::log(0.75)};
  EXPECT_NEAR(kl_divergence(p, q), 0.5 * std::log(4.0 / 3.0), 1e-12);
  EXPECT_NEAR(kl_divergence(p, p), 0.0, 1e-15);
}

TEST(KlDivergence, FileRoundTripAndSummary) {
  const std::string path = temp_path("kld.safetensors");
  LogitsRecorder rec;
  const std::vector<float> base0 = {0.0f, 0.0f};                          // p = (1/2, 1/2)
  const std::vector<float> base1 = {std::log(0.9f), std::log(0.1f)};      // p = (0.9, 0.1)
  rec.add(base0, 0);
  rec.add(base1, 0);
  EXPECT_EQ(rec.count(), 2);
  rec.save(path, {{"mode", "test"}});
  {
    KldAccumulator acc(path);
    EXPECT_EQ(acc.count(), 2);
    EXPECT_EQ(acc.metadata().value("mode", ""), "test");
    const std::vector<float> q0 = {0.0f, std::log(3.0f)};  // q = (1/4, 3/4)
    acc.add(q0, 0);
    acc.add(base1, 0);  // the same distribution: KLD ~ 0 (f16 storage)
    const KldResult r = acc.finish();
    EXPECT_EQ(r.n, 2);
    const double k0 = 0.5 * std::log(4.0 / 3.0);
    EXPECT_NEAR(r.mean_kld, k0 / 2, 1e-4);
    EXPECT_NEAR(r.max_kld, k0, 1e-4);
    EXPECT_NEAR(r.ppl_base, std::exp(-(std::log(0.5) + std::log(0.9)) / 2), 1e-3);
    EXPECT_NEAR(r.ppl, std::exp(-(std::log(0.25) + std::log(0.9)) / 2), 1e-3);
    EXPECT_NEAR(r.dppl, r.ppl - r.ppl_base, 1e-12);
    EXPECT_NEAR(r.same_top1, 0.5, 1e-12);  // position 0: base argmax 0 (tie -> first), quant argmax 1
    EXPECT_NEAR(r.rms_dp, std::sqrt((0.25 * 0.25 + 0.0) / 2), 1e-3);
  }
  {
    KldAccumulator acc(path);
    EXPECT_THROW(acc.add(base0, 1), Error);  // different target token
    const std::vector<float> v3 = {0, 0, 0};
    EXPECT_THROW(acc.add(v3, 0), Error);     // different vocabulary
    acc.add(base0, 0);
    EXPECT_THROW(acc.finish(), Error);       // fewer positions than saved
    acc.add(base1, 0);
    EXPECT_THROW(acc.add(base1, 0), Error);  // more positions than saved
  }
  std::filesystem::remove(path);
}

TEST(Tasks, ParseFormatsAndRejectBadRows) {
  const std::string path = temp_path("wino.jsonl");
  {
    std::ofstream f(path);
    f << R"({"context_options": ["A said B", "A said C"], "continuation": "was right.", "gold": 1})" << "\n\n";
    f << R"({"context_options": ["x", "y"], "continuation": "z", "gold": 0})" << "\n";
  }
  auto docs = load_task_docs("winogrande", path, 0);
  ASSERT_EQ(docs.size(), 2u);
  ASSERT_EQ(docs[0].requests.size(), 2u);
  EXPECT_EQ(docs[0].requests[1].context, "A said C");
  EXPECT_EQ(docs[0].requests[1].continuation, " was right.");
  EXPECT_EQ(docs[0].choices[0], "A said B");
  EXPECT_EQ(docs[0].gold, 1);
  EXPECT_EQ(load_task_docs("winogrande", path, 1).size(), 1u);
  {
    std::ofstream f(path);
    f << R"({"query": "Q?", "choices": ["yes", "no"], "gold": 2})" << "\n";
  }
  EXPECT_THROW(load_task_docs("boolq", path), Error);  // gold out of range
  {
    std::ofstream f(path);
    f << R"({"query": "Q?", "choices": ["yes", "no"], "gold": 1})" << "\n";
  }
  docs = load_task_docs("boolq", path);
  EXPECT_EQ(docs[0].requests[0].context, "Q?");
  EXPECT_EQ(docs[0].requests[0].continuation, " yes");
  EXPECT_THROW(load_task_docs("lambada_openai", path), Error);  // missing context
  EXPECT_THROW(load_task_docs("hellaswag", path), Error);
  EXPECT_THROW(load_task_docs("boolq", temp_path("missing.jsonl")), Error);
  std::filesystem::remove(path);
  EXPECT_EQ(utf8_length("h\xc3\xa9llo"), 5u);
}

TEST(TaskMetrics, AccNormUsesCharacterLengths) {
  std::vector<TaskDoc> docs(2);
  docs[0].choices = {"ab", "abcdef"};
  docs[0].gold = 1;
  docs[1].choices = {"\xc3\xa9\xc3\xa9", "abc"};  // 2 characters (4 bytes), 3 characters
  docs[1].gold = 0;
  TaskResult r;
  r.ll = {{-4.0, -6.0}, {-3.0, -4.0}};
  r.greedy = {{0, 0}, {0, 0}};
  compute_task_metrics(TaskType::kMultipleChoice, docs, r);
  // doc 0: acc picks 0 (wrong); acc_norm: -2 vs -1 picks 1 (right).
  // doc 1: acc picks 0 (right); acc_norm: -1.5 vs -1.333 picks 1 (wrong; by bytes it would pick 0).
  EXPECT_EQ(r.per_example["acc"], (std::vector<double>{0, 1}));
  EXPECT_EQ(r.per_example["acc_norm"], (std::vector<double>{1, 0}));
  EXPECT_DOUBLE_EQ(r.metrics["acc"].value, 0.5);
  EXPECT_NEAR(r.metrics["acc"].std_error, std::sqrt(0.25 / 1), 1e-12);
  // Ties go to the first choice, as np.argmax.
  r.ll = {{-2.0, -2.0}, {-1.0, -1.0}};
  compute_task_metrics(TaskType::kMultipleChoice, docs, r);
  EXPECT_EQ(r.per_example["acc"], (std::vector<double>{0, 1}));
  // Round trip through JSON and a paired comparison with itself.
  nlohmann::json run;
  run["tasks"]["copa"] = task_result_to_json(r);
  const TaskResult back = task_result_from_json("copa", run["tasks"]["copa"], "test");
  EXPECT_EQ(back.per_example.at("acc"), r.per_example.at("acc"));
  const auto rows = compare_results(run, run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].test.diff, 0.0);
}

namespace {

// Reference: one plain forward over the (truncated) input, summing log_softmax of the continuation.
LoglikelihoodResult reference_score(Backend& m, const LoglikelihoodRequest& r, size_t max_len) {
  Ids full = r.context;
  full.insert(full.end(), r.continuation.begin(), r.continuation.end());
  if (full.size() > max_len + 1) full.erase(full.begin(), full.end() - static_cast<std::ptrdiff_t>(max_len + 1));
  const Ids inp(full.begin(), full.end() - 1);
  const auto& c = m.model().config();
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 128};
  KvCache cache(spec);
  BlockAllocator alloc(spec.num_blocks);
  BlockTable bt;
  bt.reserve(alloc, static_cast<int64_t>(inp.size()), 16);
  BatchChunk ch{inp, 0, bt.blocks, true};
  std::vector<float> logits;
  m.forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
  LoglikelihoodResult out;
  out.is_greedy = true;
  const size_t V = static_cast<size_t>(m.model().vocab_size());
  for (size_t t = 0; t < r.continuation.size(); ++t) {
    const size_t pos = inp.size() - r.continuation.size() + t;
    const auto [lp, g] = token_logprob(std::span<const float>(&logits[pos * V], V), r.continuation[t]);
    out.logprob += lp;
    out.is_greedy = out.is_greedy && g;
  }
  return out;
}

}  // namespace

TEST(LoglikelihoodScorer, BatchedSharedPrefillMatchesPlainForward) {
  auto model = test::cpu_backend(load_transformer(test::bundled_model()));
  auto tok = Tokenizer::from_file(test::bundled_model() + "/tokenizer.json");
  // Contexts of several lengths around block boundaries (16), each with 2-3 continuations.
  const std::vector<std::string> contexts = {
      "The dog", "It was a dark and stormy night; the rain fell in torrents, except at occasional intervals",
      "Sherlock Holmes took his bottle from the corner of the mantel-piece and his hypodermic syringe from its"
      " neat morocco case. With his long, white, nervous fingers he adjusted the delicate needle"};
  const std::vector<std::string> conts = {" barked.", " went home to his wife and", " and"};
  std::vector<LoglikelihoodRequest> reqs;
  for (const auto& c : contexts)
    for (const auto& x : conts) reqs.push_back(encode_pair(*tok, c, x, false));
  // A request with a trailing-space context: the space moves to the continuation.
  reqs.push_back(encode_pair(*tok, "Question: where?\n", " Answer", false));
  EXPECT_EQ(reqs.back().context, tok->encode("Question: where?", false));
  const Ids whole = tok->encode("Question: where?\n Answer", false);
  EXPECT_EQ(reqs.back().continuation, Ids(whole.begin() + static_cast<std::ptrdiff_t>(reqs.back().context.size()),
                                          whole.end()));
  // Empty context: [prefix] + continuation alone.
  const LoglikelihoodRequest e = encode_pair(*tok, "", "Hello there", false, 0);
  EXPECT_EQ(e.context, Ids{0});
  EXPECT_EQ(e.continuation, tok->encode("Hello there", false));
  EXPECT_THROW(encode_pair(*tok, "", "x", false), Error);

  for (int max_len : {0, 24}) {  // 24: long contexts are left-truncated as lm-eval does
    const size_t L = max_len > 0 ? static_cast<size_t>(max_len) : model->model().config().max_position_embeddings;
    std::vector<LoglikelihoodResult> ref;
    for (const auto& r : reqs) ref.push_back(reference_score(*model, r, L));
    for (int batch_tokens : {1, 4096}) {
      ScorerOptions so;
      so.max_length = max_len;
      so.batch_tokens = batch_tokens;
      LoglikelihoodScorer scorer(*model, so);
      size_t calls = 0, seen = 0;
      const auto got = scorer.score(reqs, [&](size_t d, size_t n) { ++calls; EXPECT_EQ(n, reqs.size()); (void)d; },
                                    [&](size_t, size_t, std::span<const float>, int32_t) { ++seen; });
      ASSERT_EQ(got.size(), reqs.size());
      size_t expect_seen = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        EXPECT_NEAR(got[i].logprob, ref[i].logprob, 2e-4) << "request " << i << " max_len " << max_len
                                                          << " batch " << batch_tokens;
        EXPECT_EQ(got[i].is_greedy, ref[i].is_greedy);
        expect_seen += reqs[i].continuation.size();
      }
      EXPECT_EQ(seen, expect_seen);
      EXPECT_GE(calls, 1u);
    }
  }
}

TEST(LoglikelihoodScorer, RejectsBadRequests) {
  auto model = test::cpu_backend(load_transformer(test::bundled_model()));
  LoglikelihoodScorer scorer(*model);
  std::vector<LoglikelihoodRequest> r = {{{1, 2}, {}}};
  EXPECT_THROW(scorer.score(r), Error);
  r = {{{1, 2}, {model->model().vocab_size()}}};
  EXPECT_THROW(scorer.score(r), Error);
  ScorerOptions so;
  so.max_length = model->model().config().max_position_embeddings + 1;
  EXPECT_THROW(LoglikelihoodScorer(*model, so), Error);
}

TEST(RollingPerplexity, WindowsAddUpToPlainForwards) {
  auto model = test::cpu_backend(load_transformer(test::bundled_model()));
  auto tok = Tokenizer::from_file(test::bundled_model() + "/tokenizer.json");
  const std::string text = "Mr. Sherlock Holmes, who was usually very late in the mornings, save upon those not "
                           "infrequent occasions when he was up all night, was seated at the breakfast table.";
  const Ids ids = tok->encode(text, false);
  ASSERT_GT(ids.size(), 20u);
  // One window covering everything: log P(tokens | prefix) from a single forward of [prefix] + tokens[:-1].
  {
    ScorerOptions so;
    so.max_length = static_cast<int>(ids.size());
    LoglikelihoodScorer scorer(*model, so);
    const RollingPerplexityResult r = rolling_perplexity(scorer, ids, text, 0);
    EXPECT_EQ(r.windows, 1);
    Ids ctx = {0};
    const LoglikelihoodResult ref = reference_score(*model, {ctx, ids}, ids.size());
    EXPECT_NEAR(r.loglikelihood, ref.logprob, 1e-4);
    EXPECT_EQ(r.tokens, static_cast<int64_t>(ids.size()));
    EXPECT_EQ(r.words, 29);  // len(re.split(r"\s+", text))
    EXPECT_NEAR(r.word_perplexity, std::exp(-ref.logprob / 29), 1e-3 * r.word_perplexity);
  }
  // Windows of 8: the total is the sum of the windows scored one by one.
  {
    ScorerOptions so;
    so.max_length = 8;
    LoglikelihoodScorer scorer(*model, so);
    size_t positions = 0;
    const RollingPerplexityResult r = rolling_perplexity(scorer, ids, text, 0, {},
        [&](size_t, size_t, std::span<const float>, int32_t) { ++positions; });
    EXPECT_EQ(positions, ids.size());  // every token scored once
    double sum = 0;
    for (const auto& w : rolling_windows(ids, 0, 8)) sum += reference_score(*model, w, 8).logprob;
    EXPECT_NEAR(r.loglikelihood, sum, 1e-4);
    EXPECT_EQ(r.windows, static_cast<int>((ids.size() + 7) / 8));
  }
}

TEST(Perplexity, ScoredLogitsHookSeesEveryScoredPosition) {
  auto model = test::cpu_backend(load_transformer(test::bundled_model()));
  Ids ids(100);
  for (int i = 0; i < 100; ++i) ids[i] = 100 + (i * 37) % 500;
  PerplexityOptions po;
  po.n_ctx = 16;
  po.max_chunks = 3;
  double nll = 0;
  int64_t calls = 0;
  po.on_scored = [&](std::span<const float> logits, int32_t target) {
    nll -= token_logprob(logits, target).first;
    ++calls;
  };
  const PerplexityResult r = compute_perplexity(*model, ids, po);
  EXPECT_EQ(calls, r.scored_tokens);
  EXPECT_EQ(calls, 3 * 7);  // positions 8..14 of each chunk of 16
  EXPECT_NEAR(nll, r.nll_sum, 1e-3);
}
