// Bad input gets one clear error line naming the file/field, a non-zero exit, and no crash (also under ASan).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/loader.h"
#include "model/source_safetensors.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace tritium;

namespace {

// A private copy of the bundled model that a test may break.
class ModelCopy {
 public:
  ModelCopy() {
    dir_ = fs::temp_directory_path() / ("tritium_bad_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const auto& e : fs::directory_iterator(test::bundled_model())) fs::copy_file(e.path(), dir_ / e.path().filename());
    for (const auto& e : fs::directory_iterator(dir_)) fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  ~ModelCopy() { fs::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }
  std::string file(const std::string& f) const { return (dir_ / f).string(); }

  nlohmann::json config() const {
    std::ifstream in(file("config.json"));
    return nlohmann::json::parse(in);
  }
  void write_config(const nlohmann::json& j) const { std::ofstream(file("config.json")) << j.dump(2); }
  std::string weights() const { return file("model.safetensors"); }
  std::vector<uint8_t> read_weights() const {
    std::ifstream in(weights(), std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void write_weights(const std::vector<uint8_t>& b) const {
    std::ofstream(weights(), std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(b.data()),
                                                                        static_cast<std::streamsize>(b.size()));
  }
  // Rewrites the header JSON (keeping the data section) after `edit` changes it.
  template <typename F>
  void edit_header(F edit) const {
    auto b = read_weights();
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | b[i];
    auto h = nlohmann::json::parse(b.begin() + 8, b.begin() + 8 + static_cast<int64_t>(n));
    edit(h);
    std::string hs = h.dump();
    std::vector<uint8_t> out(8);
    for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(hs.size() >> (8 * i));
    out.insert(out.end(), hs.begin(), hs.end());
    out.insert(out.end(), b.begin() + 8 + static_cast<int64_t>(n), b.end());
    write_weights(out);
  }

 private:
  fs::path dir_;
};

// Expects: non-zero exit, stderr is exactly one line "error: ..." containing every needle, no sanitizer report.
void expect_clean_error(const test::CliResult& r, const std::vector<std::string>& needles) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
  ASSERT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "missing '" << n << "' in: " << r.err;
}

test::CliResult gen(const std::string& dir, const std::string& prompt = "Hello") {
  return test::run_cli({"generate", "-m", dir, "-p", prompt, "-n", "4", "--temp", "0"});
}

}  // namespace

TEST(BadInput, GoodModelStillWorks) {
  ModelCopy m;
  auto r = gen(m.dir());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Hello", 0), 0u);
}

TEST(BadInput, MissingFolder) { expect_clean_error(gen("/nonexistent/model"), {"/nonexistent/model", "not found"}); }

TEST(BadInput, ConfigMissingRequiredField) {
  ModelCopy m;
  auto j = m.config();
  j.erase("hidden_size");
  m.write_config(j);
  expect_clean_error(gen(m.dir()), {"config.json", "hidden_size"});
}

TEST(BadInput, ConfigFieldOfWrongType) {
  ModelCopy m;
  auto j = m.config();
  j["num_hidden_layers"] = "eight";
  m.write_config(j);
  expect_clean_error(gen(m.dir()), {"config.json", "num_hidden_layers"});
}

TEST(BadInput, ConfigBooleanOfWrongType) {
  // Was an unlabelled nlohmann type_error (attention_bias) or silently ignored (tie_word_embeddings).
  for (const char* key : {"attention_bias", "mlp_bias", "tie_word_embeddings"}) {
    ModelCopy m;
    auto j = m.config();
    j[key] = "yes";
    m.write_config(j);
    expect_clean_error(gen(m.dir()), {"config.json", key, "true or false"});
  }
}

TEST(BadInput, ConfigLegacyRopeScalingTypeIsRejected) {
  // rope_scaling {"type": "linear"} (older transformers key) used to be ignored: wrong positions, no error.
  ModelCopy m;
  auto j = m.config();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  m.write_config(j);
  expect_clean_error(gen(m.dir()), {"config.json", "rope_scaling.type", "linear"});
}

TEST(BadInput, ConfigQuantizationFieldOfWrongType) {
  ModelCopy m;
  auto j = m.config();
  j["quantization_config"]["linear_class"] = 5;
  m.write_config(j);
  expect_clean_error(gen(m.dir()), {"config.json", "linear_class", "must be a string"});
}

TEST(BadInput, ServeMaxModelLenPastTheModelContext) {
  // Was clamped silently to max_position_embeddings. The 1-byte KV budget makes a regression fail at engine
  // start-up instead of leaving a server running.
  auto r = test::run_cli({"serve", "--max-model-len", "5000", "--kv-cache-memory", "1B", "--port", "0", "-t", "1"});
  expect_clean_error(r, {"--max-model-len 5000", "max_position_embeddings 1024"});
}

TEST(BadInput, ServeKvPoolSmallerThanOneSequence) {
  // 1 MiB of f32 KV for tiny-bitnet = 128 tokens < max_model_len 1024: answers would be cut short; vLLM refuses too.
  // Port 1 fails to bind if a regression gets that far, so no server is left running.
  auto r = test::run_cli({"serve", "--kv-cache-memory", "1MiB", "--port", "1", "-t", "1"});
  expect_clean_error(r, {"KV cache holds", "max_model_len 1024"});
}

TEST(BadInput, WeightsFormatOnAFloatModelIsAWarning) {
  REQUIRE_SHARED_DATA(shared);
  // Was silently ignored: --weights only repacks ternary projections.
  auto r = test::run_cli({"generate", "-m", shared + "/models/tiny-qwen2", "--weights", "tq1", "-p", "Hello", "-n", "2",
                          "--temp", "0", "-t", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: --weights tq1 ignored"), std::string::npos) << r.err;
}

TEST(BadInput, ConfigTokenIdOutsideTheVocabulary) {
  // bos_token_id was not range-checked (an id past the embedding rows), and 2^32 wrapped to 0 in the int32
  // conversion. tiny-bitnet has vocab_size 8192.
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"bos_token_id", 8192}, {"bos_token_id", -1}, {"bos_token_id", 4294967296ull},
      {"eos_token_id", {1, 9000}}, {"eos_token_id", -5}};
  for (const auto& [key, value] : cases) {
    SCOPED_TRACE(key + " = " + value.dump());
    ModelCopy m;
    auto j = m.config();
    j[key] = value;
    m.write_config(j);
    expect_clean_error(gen(m.dir()), {"config.json", key, "outside the vocabulary [0, 8192)"});
  }
  // generation_config.json's ids are used too: the same check, naming that file.
  ModelCopy m;
  std::ofstream(m.file("generation_config.json")) << R"({"bos_token_id": 0, "eos_token_id": [1, 8192]})";
  expect_clean_error(gen(m.dir()), {"generation_config.json", "eos_token_id", "outside the vocabulary"});
}

TEST(BadInput, ConfigTokenIdsMayBeNullOrAbsent) {
  // HF writes null for "no such token"; absent is allowed too. In range (8191, the last id) is fine. pad_token_id
  // is not used: -1 ("none" in some real checkpoints) loads.
  ModelCopy m;
  auto j = m.config();
  j["pad_token_id"] = -1;
  j["eos_token_id"] = {1, 8191};
  j.erase("bos_token_id");
  m.write_config(j);
  auto r = gen(m.dir());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  j["bos_token_id"] = nullptr;
  m.write_config(j);
  r = gen(m.dir());
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(BadInput, ConfigNotJson) {
  ModelCopy m;
  std::ofstream(m.file("config.json")) << "{ not json";
  expect_clean_error(gen(m.dir()), {"config.json", "invalid JSON"});
}

TEST(BadInput, UnsupportedArchitecture) {
  ModelCopy m;
  auto j = m.config();
  j["architectures"] = {"GPT2LMHeadModel"};
  m.write_config(j);
  expect_clean_error(gen(m.dir()), {"config.json", "unsupported architecture", "GPT2LMHeadModel"});
}

TEST(BadInput, TruncatedSafetensors) {
  ModelCopy m;
  auto b = m.read_weights();
  b.resize(b.size() / 2);
  m.write_weights(b);
  expect_clean_error(gen(m.dir()), {"model.safetensors", "outside the data section"});
  b.resize(5);
  m.write_weights(b);
  expect_clean_error(gen(m.dir()), {"model.safetensors", "truncated"});
  b.assign(8, 0xff);  // header length 2^64-1
  m.write_weights(b);
  expect_clean_error(gen(m.dir()), {"model.safetensors", "header length"});
}

TEST(BadInput, HeaderOffsetsPastTheEnd) {
  ModelCopy m;
  m.edit_header([](nlohmann::json& h) {
    auto& t = h["model.norm.weight"];
    const uint64_t b = t["data_offsets"][0].get<uint64_t>();
    t["data_offsets"] = {b + (1ull << 40), b + (1ull << 40) + 512};
  });
  expect_clean_error(gen(m.dir()), {"model.safetensors", "model.norm.weight", "data_offsets"});
}

TEST(BadInput, ShapeTimesDtypeIsNotByteSize) {
  ModelCopy m;
  m.edit_header([](nlohmann::json& h) { h["model.norm.weight"]["shape"] = {300}; });
  expect_clean_error(gen(m.dir()), {"model.safetensors", "model.norm.weight", "byte size"});
}

TEST(BadInput, OverlappingTensors) {
  ModelCopy m;
  m.edit_header([](nlohmann::json& h) { h["model.norm.weight"]["data_offsets"] = h["model.layers.0.input_layernorm.weight"]["data_offsets"]; });
  expect_clean_error(gen(m.dir()), {"model.safetensors", "overlap"});
}

TEST(BadInput, HeaderNotJson) {
  ModelCopy m;
  std::vector<uint8_t> b = {4, 0, 0, 0, 0, 0, 0, 0, '{', 'x', 'y', 'z'};
  m.write_weights(b);
  expect_clean_error(gen(m.dir()), {"model.safetensors", "not valid JSON"});
}

TEST(BadInput, UnknownDtype) {
  ModelCopy m;
  m.edit_header([](nlohmann::json& h) { h["model.norm.weight"]["dtype"] = "Q4_K"; });
  expect_clean_error(gen(m.dir()), {"model.safetensors", "model.norm.weight", "dtype"});
}

TEST(BadInput, WeightMissing) {
  ModelCopy m;
  m.edit_header([](nlohmann::json& h) { h.erase("model.layers.3.self_attn.k_proj.weight"); });
  expect_clean_error(gen(m.dir()), {"model.layers.3.self_attn.k_proj.weight", "missing"});
}

TEST(BadInput, WeightOfWrongShape) {
  ModelCopy m;
  m.edit_header([](nlohmann::json& h) { h["model.layers.2.mlp.down_proj.weight"]["shape"] = {768, 64}; });
  expect_clean_error(gen(m.dir()), {"model.layers.2.mlp.down_proj.weight", "shape [768, 64]", "expected"});
}

TEST(BadInput, WeightOfWrongDtype) {
  ModelCopy m;
  // An embedding table stored as I8 (same byte count as its shape would need in I16): not a float type.
  m.edit_header([](nlohmann::json& h) {
    auto& t = h["model.embed_tokens.weight"];
    t["dtype"] = "I16";
  });
  expect_clean_error(gen(m.dir()), {"model.embed_tokens.weight", "I16"});
}

TEST(BadInput, InvalidUtf8Prompt) {
  expect_clean_error(test::run_cli({"generate", "-p", "caf\xc3", "-n", "2"}), {"invalid UTF-8"});
  expect_clean_error(test::run_cli({"generate", "-p", "\xff\xfe", "-n", "2"}), {"invalid UTF-8"});
}

TEST(BadInput, ChatKeepsTheSessionAfterABadLine) {
  // An invalid-UTF-8 line ended the whole chat session ("error: invalid UTF-8 in input at byte 176", exit 1; the
  // byte counted in the rendered conversation). Now that line gets one error and the conversation goes on as if it
  // had never been typed; so does a line too long for the context.
  std::string too_long;
  for (int i = 0; i < 1100; ++i) too_long += " the";
  const std::vector<std::string> args = {"chat", "-n", "4", "--temp", "0", "-t", "1"};
  const auto good = test::run_cli(args, "Hello\nHow are you?\n");
  ASSERT_EQ(good.exit_code, 0) << good.err;
  const auto bad = test::run_cli(args, "Hello\ncaf\xc3\n\xff\xfe\n" + too_long + "\nHow are you?\n");
  EXPECT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_NE(bad.err.find("error: input line 2 is not valid UTF-8 (byte 3); it was skipped\n"), std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("error: input line 3 is not valid UTF-8 (byte 0); it was skipped\n"), std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("context of 1024"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 3) << bad.err;
  // Same replies as without the bad lines: each of those only added a "> " prompt.
  std::string out = bad.out;
  for (int i = 0; i < 3; ++i) {
    const size_t p = out.find("> > ");
    ASSERT_NE(p, std::string::npos) << bad.out;
    out.erase(p, 2);
  }
  EXPECT_EQ(out, good.out);
  // With -p the message is the whole request: a clean error and a non-zero exit.
  expect_clean_error(test::run_cli({"chat", "-p", "caf\xc3", "-n", "2"}), {"--prompt", "not valid UTF-8"});
}

TEST(BadInput, PromptLongerThanContext) {
  std::string p;
  for (int i = 0; i < 1100; ++i) p += " the";
  expect_clean_error(test::run_cli({"generate", "-p", p, "-n", "2"}), {"prompt has", "context of 1024"});
}

TEST(BadInput, EmptyPromptStillHasBos) {
  auto r = test::run_cli({"generate", "-p", "", "-n", "3", "--temp", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(BadInput, PerplexityOnTooShortText) {
  const auto f = fs::temp_directory_path() / "tritium_short.txt";
  std::ofstream(f) << "Too short.";
  expect_clean_error(test::run_cli({"perplexity", "-f", f.string(), "--ctx", "512"}), {"need at least"});
  fs::remove(f);
  expect_clean_error(test::run_cli({"perplexity", "-f", "/nonexistent.txt"}), {"/nonexistent.txt"});
}

TEST(BadInput, CommandLineMistakesNameWhatIsWrong) {
  // CLI11 checks requirements before unknown arguments: a mistyped subcommand said "A subcommand is required" and
  // a mistyped option "--prompt is required", on two lines without "error: ".
  expect_clean_error(test::run_cli({"nosuchcmd"}),
                     {"unknown subcommand 'nosuchcmd'", "generate, ", "serve", "see 'tritium --help'"});
  expect_clean_error(test::run_cli({"generate", "--bogus"}),
                     {"unknown argument '--bogus' for 'tritium generate'", "see 'tritium generate --help'"});
  expect_clean_error(test::run_cli({"bench", "serve", "--num-prompts", "0"}),
                     {"--num-prompts", "not in range 1", "see 'tritium bench serve --help'"});
  expect_clean_error(test::run_cli({}), {"subcommand is required", "see 'tritium --help'"});
  // bench -p 0 -n 0 failed with "KV cache: invalid spec (0 blocks of 16 tokens)". (-p 0 alone skips the pp test.)
  expect_clean_error(test::run_cli({"bench", "-p", "0", "-n", "0"}),
                     {"nothing to measure", "-p/--n-prompt", "-n/--n-gen"});
  const auto help = test::run_cli({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("generate"), std::string::npos);
}

TEST(BadInput, LibraryLevelErrorsAreTritiumErrors) {
  EXPECT_THROW(load_transformer("/nonexistent"), Error);
  EXPECT_THROW(SafetensorsFile("/nonexistent.safetensors"), Error);
  std::vector<uint8_t> bad = {0x03};  // code 3 is unused in the BitNet packing
  EXPECT_THROW(unpack_bitnet_weight(bad.data(), 4, 1), Error);
}
