// tritium eval against the Hugging Face transformers oracle (tools/eval_oracle.py run on a GPU machine,
// shrunk into tests/data/eval/oracle_golden.json by tools/make_eval_golden.py): per-example loglikelihoods
// within 1e-3 and equal accuracies on the first documents of every task for tiny-qwen2, statistical bounds for
// tiny-bitnet (see TinyBitnetWithinTransformersOwnSpread); and
// the rolling (lm-eval loglikelihood_rolling) loglikelihood of a 12,000-character text.
// The CI run checks the first few documents of each task (ASan: fewer); TRITIUM_EVAL_FULL=1 checks all 200.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "eval/evaluator.h"
#include "eval/rolling_perplexity.h"
#include "eval/text_file.h"
#include "model/loader.h"
#include "test_util.h"

using namespace tritium;

namespace {

nlohmann::json golden() {
  std::ifstream in(test::data_dir() + "/eval/oracle_golden.json");
  return nlohmann::json::parse(in);
}

int docs_for(const std::string& task) {
  if (const char* e = std::getenv("TRITIUM_EVAL_FULL"); e && std::string(e) == "1") return 200;
  if (test::under_sanitizer()) return 2;
  return task == "boolq" ? 6 : 10;  // boolq passages are long
}

// argmax with ties to the first index (np.argmax), plain or normalized by the choice's character length.
size_t pick(const std::vector<double>& ll, const std::vector<std::string>& choices, bool norm) {
  size_t best = 0;
  auto v = [&](size_t k) { return norm ? ll[k] / static_cast<double>(utf8_length(choices[k])) : ll[k]; };
  for (size_t k = 1; k < ll.size(); ++k)
    if (v(k) > v(best)) best = k;
  return best;
}

// transformers 5.17's AutoTokenizer maps model_type qwen2 to its Qwen2Tokenizer class, which builds the
// pre-tokenizer from Qwen2's own regex (digits one at a time, \p{N}) instead of the tokenizer.json one; tiny-qwen2's
// tokenizer.json has the Llama-3 regex (\p{N}{1,3}). lm-eval (and the oracle) therefore see single digits on this
// model. This rebuilds that tokenizer: the file's JSON with the digit rule of Qwen2's regex.
std::string qwen2_autotokenizer_dir(const std::string& model_dir) {
  const std::string dir = (std::filesystem::temp_directory_path() / "tritium_test_eval_qwen2_tok").string();
  std::filesystem::create_directories(dir);
  std::ifstream in(model_dir + "/tokenizer.json");
  nlohmann::json t = nlohmann::json::parse(in);
  auto& re = t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"];
  std::string s = re.get<std::string>();
  const std::string from = "\\p{N}{1,3}";
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "tiny-qwen2 tokenizer.json no longer has the Llama-3 digit rule";
  if (at != std::string::npos) s.replace(at, from.size(), "\\p{N}");
  re = s;
  std::ofstream(dir + "/tokenizer.json") << t.dump();
  std::filesystem::copy_file(model_dir + "/tokenizer_config.json", dir + "/tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  return dir;
}

// Tolerances. tiny-qwen2 (float weights and activations): every loglikelihood within 1e-3 and the same argmax
// everywhere. tiny-bitnet quantizes every linear layer's input per token (round(x * 127 / max|x|)): CPU and
// CUDA float32 sums differ in the last bits, which moves some values across a rounding boundary, and the
// flips compound over 8 layers; the same model's golden logits already differ from transformers by up to
// 0.5 (mean 0.05, test_model_golden.cpp). So for BitNet the check is statistical: each loglikelihood within
// 0.6, the mean deviation under 0.1, and the same choice wherever the oracle's margin exceeds twice that
// tolerance (near-ties may flip).
struct Tolerance {
  double per_request;
  double mean;
  bool exact_accuracy;
};

void check_model(const std::string& name, const std::string& model_dir, const std::string& data_dir,
                 const Tolerance& tol) {
  const nlohmann::json g = golden()["models"][name];
  auto model = test::cpu_backend(load_transformer(model_dir));
  const std::string tok_dir = name == "tiny-qwen2" ? qwen2_autotokenizer_dir(model_dir) : model_dir;
  auto tok = Tokenizer::from_file(tok_dir + "/tokenizer.json");
  EXPECT_EQ(g["max_length"].get<int>(), model->model().config().max_position_embeddings);
  double worst = 0;
  for (const auto& task : eval_task_names()) {
    SCOPED_TRACE(name + " " + task);
    const auto& gt = g["tasks"][task];
    const int n = std::min<int>(docs_for(task), gt["n"].get<int>());
    const auto docs = load_task_docs(task, data_dir + "/" + task + ".jsonl", n);
    const TaskResult r = evaluate_task(*model, *tok, task, docs, EvalOptions{});
    ASSERT_EQ(r.n, n);
    const bool mc = eval_task_type(task) == TaskType::kMultipleChoice;
    double acc_ref = 0, acc_norm_ref = 0, sum_dev = 0;
    int64_t requests = 0;
    for (int i = 0; i < n; ++i) {
      const auto ref = gt["ll"][i].get<std::vector<double>>();
      ASSERT_EQ(ref.size(), r.ll[i].size());
      for (size_t k = 0; k < ref.size(); ++k) {
        EXPECT_NEAR(r.ll[i][k], ref[k], tol.per_request) << "doc " << i << " request " << k;
        worst = std::max(worst, std::fabs(r.ll[i][k] - ref[k]));
        sum_dev += std::fabs(r.ll[i][k] - ref[k]);
        ++requests;
      }
      if (mc) {
        const size_t p = pick(ref, docs[i].choices, false), pn = pick(ref, docs[i].choices, true);
        acc_ref += p == static_cast<size_t>(docs[i].gold);
        acc_norm_ref += pn == static_cast<size_t>(docs[i].gold);
        // Margin of the oracle's choice over the runner-up (plain and normalized).
        double margin = INFINITY, margin_n = INFINITY;
        for (size_t k = 0; k < ref.size(); ++k) {
          if (k != p) margin = std::min(margin, ref[p] - ref[k]);
          const double len_k = static_cast<double>(utf8_length(docs[i].choices[k]));
          const double len_p = static_cast<double>(utf8_length(docs[i].choices[pn]));
          if (k != pn) margin_n = std::min(margin_n, (ref[pn] - tol.per_request) / len_p -
                                                         (ref[k] + tol.per_request) / len_k);
        }
        if (tol.exact_accuracy || margin > 2 * tol.per_request) {
          EXPECT_EQ(r.per_example.at("acc")[i], p == static_cast<size_t>(docs[i].gold) ? 1.0 : 0.0) << "doc " << i;
        }
        if (tol.exact_accuracy || margin_n > 0) {
          EXPECT_EQ(r.per_example.at("acc_norm")[i], pn == static_cast<size_t>(docs[i].gold) ? 1.0 : 0.0)
              << "doc " << i;
        }
      } else {
        acc_ref += gt["greedy"][i].get<int>();
        EXPECT_EQ(r.greedy[i][0], gt["greedy"][i].get<int>()) << "doc " << i;
      }
    }
    EXPECT_LE(sum_dev / static_cast<double>(requests), tol.mean);
    if (tol.exact_accuracy) {
      EXPECT_DOUBLE_EQ(r.metrics.at("acc").value, acc_ref / n);
      if (mc) {
        EXPECT_DOUBLE_EQ(r.metrics.at("acc_norm").value, acc_norm_ref / n);
      }
      if (n == gt["n"].get<int>()) {  // full run: the oracle's own aggregates
        EXPECT_NEAR(r.metrics.at("acc").value, gt["acc"].get<double>(), 1e-12);
        if (mc) {
          EXPECT_NEAR(r.metrics.at("acc_norm").value, gt["acc_norm"].get<double>(), 1e-12);
        } else {
          EXPECT_NEAR(r.metrics.at("perplexity").value / gt["ppl"].get<double>(), 1.0, 1e-4);
        }
      }
    }
  }
  std::printf("[%s] largest |ll - oracle ll| = %.3g\n", name.c_str(), worst);

  // The BOS option (lm-eval add_bos_token=True) on copa.
  {
    const auto& gb = g["copa_add_bos"];
    const int n = test::under_sanitizer() ? 2 : 10;
    const auto docs = load_task_docs("copa", data_dir + "/copa.jsonl", n);
    EvalOptions eo;
    eo.add_bos = true;
    const TaskResult r = evaluate_task(*model, *tok, "copa", docs, eo);
    for (int i = 0; i < n; ++i)
      for (size_t k = 0; k < r.ll[i].size(); ++k)
        EXPECT_NEAR(r.ll[i][k], gb["ll"][i][k].get<double>(), tol.per_request) << "add_bos doc " << i;
  }

  // Rolling loglikelihood of tests/data/eval/rolling.txt (12,000 characters, about 3,250 tokens, 4 windows).
  if (!test::under_sanitizer() || name == "tiny-bitnet") {
    const auto& gr = g["rolling"];
    const std::string text = read_text_universal_newlines(test::data_dir() + "/eval/rolling.txt");
    const auto ids = tok->encode(text, false);
    EXPECT_EQ(static_cast<int64_t>(ids.size()), gr["tokens"].get<int64_t>());
    LoglikelihoodScorer scorer(*model);
    const RollingPerplexityResult rr = rolling_perplexity(scorer, ids, text, *tok->bos_id());
    EXPECT_EQ(rr.windows, static_cast<int>(gr["windows"].size()));
    EXPECT_EQ(rr.bytes, gr["bytes"].get<int64_t>());
    const double ref = gr["loglikelihood"].get<double>();
    // Summed over ~3,250 tokens: qwen2 agrees to ~1e-4 in all; BitNet to a relative 1e-4.
    EXPECT_NEAR(rr.loglikelihood, ref, tol.exact_accuracy ? 0.02 : 1e-4 * std::fabs(ref));
    std::printf("[%s] rolling ll %.4f (oracle %.4f), word ppl %.3f, byte ppl %.4f, bits/byte %.4f\n", name.c_str(),
                rr.loglikelihood, ref, rr.word_perplexity, rr.byte_perplexity, rr.bits_per_byte);
  }
}

}  // namespace

TEST(EvalOracle, TinyBitnetMatchesTransformers) {
  REQUIRE_SHARED_DATA(shared);
  check_model("tiny-bitnet", test::bundled_model(), shared + "/data/eval", {0.6, 0.1, false});
}

TEST(EvalOracle, TinyQwen2MatchesTransformers) {
  REQUIRE_SHARED_DATA(shared);
  check_model("tiny-qwen2", shared + "/models/tiny-qwen2", shared + "/data/eval", {1e-3, 1e-3, true});
}

// BitNet: how far is "far" from the oracle? tests/data/eval/oracle_bitnet_spread.json holds transformers' own
// loglikelihoods for tiny-bitnet computed in float32 on the CPU (and float64 on CPU and GPU), next to the golden
// float32-on-GPU run. Two float32 runs of transformers itself differ by a mean 0.03-0.09 nats per request (the
// per-token int8 activation rounding amplifies last-bit differences), so the 1e-3 cannot hold for any
// float32 implementation of this model. What must hold: tritium's deviation from the golden run is of the same
// size as transformers' deviation from itself (pooled mean within 1.5x over the first 40 documents of three tasks).
TEST(EvalOracle, TinyBitnetWithinTransformersOwnSpread) {
  REQUIRE_SHARED_DATA(shared);
  if (test::under_sanitizer()) GTEST_SKIP() << "Release-only (about 500 scored requests)";
  std::ifstream in(test::data_dir() + "/eval/oracle_bitnet_spread.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json spread = nlohmann::json::parse(in);
  const nlohmann::json g = golden()["models"]["tiny-bitnet"];
  auto model = test::cpu_backend(load_transformer(test::bundled_model()));
  auto tok = Tokenizer::from_file(test::bundled_model() + "/tokenizer.json");
  const int n = 40;
  double dev_tritium = 0, dev_hf = 0, dev_hf64 = 0;
  int64_t requests = 0;
  for (const std::string task : {"piqa", "arc_easy", "lambada_openai"}) {
    const auto docs = load_task_docs(task, shared + "/data/eval/" + task + ".jsonl", n);
    const TaskResult r = evaluate_task(*model, *tok, task, docs, EvalOptions{});
    for (int i = 0; i < n; ++i) {
      const auto ref = g["tasks"][task]["ll"][i].get<std::vector<double>>();
      const auto hf32 = spread["tasks"][task]["cpu_float32"][i].get<std::vector<double>>();
      const auto hf64 = spread["tasks"][task]["gpu_float64"][i].get<std::vector<double>>();
      ASSERT_EQ(r.ll[i].size(), ref.size());
      ASSERT_EQ(hf32.size(), ref.size());
      for (size_t k = 0; k < ref.size(); ++k) {
        dev_tritium += std::fabs(r.ll[i][k] - ref[k]);
        dev_hf += std::fabs(hf32[k] - ref[k]);
        dev_hf64 += std::fabs(hf64[k] - ref[k]);
        ++requests;
      }
    }
  }
  dev_tritium /= static_cast<double>(requests);
  dev_hf /= static_cast<double>(requests);
  dev_hf64 /= static_cast<double>(requests);
  std::printf("tiny-bitnet, %lld requests, mean |ll - transformers float32 GPU|: tritium %.4f, transformers float32 "
              "CPU %.4f, transformers float64 GPU %.4f\n",
              static_cast<long long>(requests), dev_tritium, dev_hf, dev_hf64);
  EXPECT_GT(dev_hf, 1e-2);  // the golden files really disagree with each other (else this test proves nothing)
  EXPECT_LE(dev_tritium, 1.5 * dev_hf);
}
