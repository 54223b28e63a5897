// GGUF files at the command line: `-m FILE.gguf` generates and chats as the safetensors folder does, `convert`
// writes a tritium model that loads to the same logits, `inspect` reports the file's types and zero densities, and
// every damaged file (truncated, offsets past the end, huge counts, wrong alignment, unknown types, bytes that do
// not match shape x type, broken metadata) gives exactly one `error:` line and exit status 1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "gguf_test_util.h"
#include "io/safetensors.h"
#include "model/loader.h"
#include "model/model_files.h"

using namespace tritium;
namespace fs = std::filesystem;

namespace {

std::vector<float> prompt_logits(const Transformer& m, const std::vector<int32_t>& ids) {
  CpuBackend be(m);
  return test::prompt_logits(be, ids);
}

test::CliResult gen(const std::string& model, const std::string& prompt = "Once upon a time") {
  return test::run_cli({"generate", "-m", model, "-p", prompt, "-n", "24", "--temp", "0", "-t", "1"});
}

// Offset in b of a length-prefixed string (a metadata key or tensor name).
size_t find_key(const std::vector<uint8_t>& b, const std::string& s) {
  std::vector<uint8_t> pat;
  test::GgufWriter::put_str(pat, s);
  const auto it = std::search(b.begin(), b.end(), pat.begin(), pat.end());
  EXPECT_NE(it, b.end()) << s;
  return static_cast<size_t>(it - b.begin());
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(&b[at], &v, sizeof(T));
}

// Field offsets of the tensor info of `name` (2-dimensional unless nd says otherwise).
struct TensorAt {
  size_t dims, type, offset;
};
TensorAt tensor_at(const std::vector<uint8_t>& b, const std::string& name, int nd = 2) {
  const size_t at = find_key(b, name) + 8 + name.size();
  return {at + 4, at + 4 + 8 * static_cast<size_t>(nd), at + 8 + 8 * static_cast<size_t>(nd)};
}

void expect_one_error_line(const test::CliResult& r, const std::string& needle, const std::string& what) {
  EXPECT_EQ(r.exit_code, 1) << what << ": " << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << what << ": " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << what << ": missing '" << needle << "' in " << r.err;
  EXPECT_TRUE(r.out.empty()) << what << ": " << r.out;
}

}  // namespace

TEST(GgufCli, GenerateAndChatAsTheSafetensorsFolder) {
  REQUIRE_GGUF_FIXTURES(dir);
  const auto st = gen(test::bundled_model());
  ASSERT_EQ(st.exit_code, 0) << st.err;
  for (const char* f : {"tiny-bitnet-I2_S.gguf", "tiny-bitnet-TQ2_0.gguf", "tiny-bitnet-F16.gguf"}) {
    const auto g = gen(dir + "/" + f);
    EXPECT_EQ(g.exit_code, 0) << g.err;
    EXPECT_EQ(g.out, st.out) << f;
  }
  auto chat = [](const std::string& m) {
    return test::run_cli({"chat", "-m", m, "-p", "Who is there?", "-n", "16", "--temp", "0", "-t", "1"});
  };
  const auto cs = chat(test::bundled_model()), cg = chat(dir + "/tiny-bitnet-I2_S.gguf");
  EXPECT_EQ(cg.exit_code, 0) << cg.err;
  EXPECT_FALSE(cs.out.empty());
  EXPECT_EQ(cg.out, cs.out);
}

TEST(GgufCli, ConvertWritesATritiumModelWithTheSameLogits) {
  REQUIRE_GGUF_FIXTURES(dir);
  test::OneThread one;
  test::TempDir d;
  for (const char* f : {"tiny-bitnet-I2_S.gguf", "tiny-qwen2-Q8_0.gguf"}) {
    SCOPED_TRACE(f);
    const std::string gguf = dir + "/" + f, out = d.file(std::string(f) + ".tritium");
    const auto r = test::run_cli({"convert", "-m", gguf, "-o", out, "-q", "-t", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* side : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                             "chat_template.jinja", "model.safetensors"})
      EXPECT_TRUE(fs::exists(fs::path(out) / side)) << side;
    const auto a = load_transformer(gguf), b = load_transformer(out);
    EXPECT_EQ(b->config().hidden_act, a->config().hidden_act);
    EXPECT_EQ(b->config().rope_theta, a->config().rope_theta);
    EXPECT_EQ(b->config().rms_norm_eps, a->config().rms_norm_eps);
    EXPECT_EQ(b->config().eos_token_ids, a->config().eos_token_ids);
    const std::vector<int32_t> ids = {0, 44, 489, 83, 1094, 16, 344};
    EXPECT_EQ(prompt_logits(*a, ids), prompt_logits(*b, ids));
    const auto ta = load_model_tokenizer(gguf), tb = load_model_tokenizer(out);
    for (const char* s : {"Hello world", " leading  spaces\n\n", "I'm here, 12345678 o'clock!"}) {
      EXPECT_EQ(ta->encode(s, true), tb->encode(s, true)) << s;
    }
    EXPECT_EQ(ta->bos_id(), tb->bos_id());
    EXPECT_EQ(ta->eos_id(), tb->eos_id());
    const auto ca = load_model_chat_template(gguf), cb = load_model_chat_template(out);
    EXPECT_EQ(ca.source, cb.source);
    EXPECT_EQ(ca.bos_token, cb.bos_token);
    EXPECT_EQ(ca.eos_token, cb.eos_token);
  }
}

TEST(GgufCli, InspectReportsTypesBitsAndZeroDensity) {
  REQUIRE_GGUF_FIXTURES(dir);
  const auto r = test::run_cli({"inspect", dir + "/tiny-bitnet-I2_S.gguf", "--json", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["container"], "gguf");
  ASSERT_EQ(j["gguf"]["tensors"].size(), 90u);
  EXPECT_EQ(j["gguf"]["metadata"]["general.architecture"], "\"bitnet-b1.58\"");
  std::map<std::string, nlohmann::json> types;
  for (const auto& t : j["gguf"]["types"]) types[t["type"]] = t;
  EXPECT_EQ(types["I2_S"]["tensors"], 56);
  EXPECT_EQ(types["I2_S"]["weights"], 6291456);
  EXPECT_NEAR(types["I2_S"]["bits_per_weight"].get<double>(), 2.0 + 8.0 * 32 * 56 / 6291456, 1e-9);
  // Zero density from the file equals the one of the loaded (repacked) model, tensor by tensor and overall.
  std::map<std::string, double> model_z;
  for (const auto& t : j["tensors"])
    if (t.contains("zero_density")) model_z[t["name"]] = t["zero_density"];
  int compared = 0;
  for (const auto& t : j["gguf"]["tensors"]) {
    if (t["name"] == "blk.0.attn_q.weight") {
      EXPECT_EQ(t["type"], "I2_S");
      EXPECT_DOUBLE_EQ(t["zero_density"].get<double>(), model_z["model.layers.0.self_attn.q_proj"]);
      ++compared;
    }
    if (t["name"] == "blk.7.ffn_down.weight") {
      EXPECT_DOUBLE_EQ(t["zero_density"].get<double>(), model_z["model.layers.7.mlp.down_proj"]);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2);
  EXPECT_NEAR(j["ternary"]["zero_density"].get<double>(), 0.3562, 5e-5);  // shared/README: z = 0.3562
  const auto text = test::run_cli({"inspect", dir + "/tiny-qwen2-Q8_0.gguf", "-t", "1"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("| Q8_0 | 57 |"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(GGUF container)"), std::string::npos);
}

TEST(GgufCli, DamagedFilesGiveOneErrorLine) {
  REQUIRE_GGUF_FIXTURES(dir);
  const auto good = test::read_bytes(dir + "/tiny-bitnet-I2_S.gguf");
  struct Case {
    std::string what, needle;
    std::function<void(std::vector<uint8_t>&)> damage;
  };
  const std::vector<Case> cases = {
      {"truncated in the data", "needs bytes", [](auto& b) { b.resize(3000000); }},
      {"truncated in the header", "bad.gguf: ", [](auto& b) { b.resize(500); }},
      {"not GGUF", "not a GGUF file (magic 'GGUX'", [](auto& b) { b[3] = 'X'; }},
      {"offset past the end", "has offset 1099511627776",
       [](auto& b) { poke<uint64_t>(b, tensor_at(b, "output_norm.weight", 1).offset, uint64_t{1} << 40); }},
      {"huge tensor count", "tensor count 2305843009213693952 cannot fit", [](auto& b) { poke<uint64_t>(b, 8, uint64_t{1} << 61); }},
      {"huge array count", "array of 1152921504606846976 STRING elements cannot fit",
       [](auto& b) { poke<uint64_t>(b, find_key(b, "tokenizer.ggml.tokens") + 8 + 21 + 8, uint64_t{1} << 60); }},
      {"huge string length", "past the end of the file", [](auto& b) { poke<uint64_t>(b, 24, uint64_t{1} << 50); }},
      {"wrong alignment", "not a multiple of general.alignment 32",
       [](auto& b) { poke<uint64_t>(b, tensor_at(b, "blk.0.attn_norm.weight", 1).offset, 4194304 + 8); }},
      {"unknown tensor type", "tensor 'blk.0.attn_q.weight' has unknown ggml type type 99",
       [](auto& b) { poke<uint32_t>(b, tensor_at(b, "blk.0.attn_q.weight").type, 99); }},
      {"unknown metadata type", "metadata 'general.name': unknown value type 77",
       [](auto& b) { poke<uint32_t>(b, find_key(b, "general.name") + 8 + 12, 77); }},
      {"bytes that do not match shape x type", "do not match the shapes and types",
       [](auto& b) { poke<uint64_t>(b, tensor_at(b, "token_embd.weight").dims + 8, 8000); }},
      {"a type tritium does not decode", "tensor 'output_norm.weight' has type I8, which tritium does not decode",
       [](auto& b) { poke<uint32_t>(b, tensor_at(b, "output_norm.weight", 1).type, 24); }},
      {"an I2_S code 3", "the unused 2-bit code 3", [&](auto& b) {
         const GgufFile f = GgufFile::parse(good.data(), good.size(), "x");
         b[f.data_offset() + f.tensor("blk.0.attn_q.weight").offset + 5] = 0xFF;
       }},
      {"a metadata value of the wrong type", "metadata 'bitnet-b1.58.block_count' has type FLOAT32, expected an integer",
       [](auto& b) { poke<uint32_t>(b, find_key(b, "bitnet-b1.58.block_count") + 8 + 24, 6); }},
      {"a missing key", "metadata 'bitnet-b1.58.embedding_length' is missing",
       [](auto& b) { b[find_key(b, "bitnet-b1.58.embedding_length") + 8 + 28] = 'X'; }},
      {"an unsupported architecture", "general.architecture 'bitnet-b1.5X' is not supported", [](auto& b) {
         b[find_key(b, "general.architecture") + 8 + 20 + 4 + 8 + 11] = 'X';
       }},
  };
  test::TempDir d;
  const std::string bad = d.file("bad.gguf");
  for (const Case& c : cases) {
    auto b = good;
    c.damage(b);
    test::write_bytes(bad, b);
    expect_one_error_line(gen(bad), c.needle, c.what);
    expect_one_error_line(test::run_cli({"inspect", bad, "-t", "1"}), c.needle, c.what + " (inspect)");
  }
  expect_one_error_line(gen(d.file("absent.gguf")), "absent.gguf: model folder or GGUF file not found", "absent");
}

// The Ternary Bonsai paths: a Q2_0 file (`synth --shape qwen3-micro`, both layouts) damaged, a Qwen3 file without
// q_norm, and a Hugging Face folder with a bitnet quantization_config on an architecture it does not apply to: one
// `error:` line each, exit status 1.
TEST(GgufCli, TernaryBonsaiDamageGivesOneErrorLine) {
  const std::string tok = test::shared_dir().empty() ? "" : test::shared_dir() + "/tokenizers/qwen3";
  if (tok.empty() || !fs::exists(tok + "/tokenizer.json")) GTEST_SKIP() << "the Qwen3 tokenizer (shared data) is absent";
  test::TempDir d;
  for (const char* block : {"128", "64"}) {
    const std::string good_path = d.file(std::string("good") + block + ".gguf");
    const auto s = test::run_cli({"synth", "--shape", "qwen3-micro", "--tokenizer", tok, "--q2-block", block, "-o",
                                  good_path});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const auto ok = gen(good_path, "Hello");
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    const auto good = test::read_bytes(good_path);
    struct Case {
      std::string what, needle;
      std::function<void(std::vector<uint8_t>&)> damage;
    };
    const std::vector<Case> cases = {
        {"a truncated Q2_0 block", "fits neither Q2_0 layout", [](auto& b) { b.resize(b.size() - 5); }},
        {"a Q2_0 size that fits neither layout", "tensor 'blk.0.attn_q.weight' (Q2_0, [128, 96]) spans",
         [](auto& b) { poke<uint64_t>(b, tensor_at(b, "blk.0.attn_q.weight").dims + 8, 96); }},
        {"a missing q_norm", "tensor 'blk.1.attn_q_norm.weight' is missing",
         [](auto& b) { b[find_key(b, "blk.1.attn_q_norm.weight") + 8 + 13] = 'x'; }},
    };
    const std::string bad = d.file("bad.gguf");
    for (const Case& c : cases) {
      auto b = good;
      c.damage(b);
      test::write_bytes(bad, b);
      expect_one_error_line(gen(bad), c.needle, c.what + " (" + block + ")");
    }
  }
  // A bitnet quantization_config on Qwen2 (whose projections have biases): refused by name.
  const fs::path folder = d.path() / "qwen2-bitnet";
  fs::create_directories(folder);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(test::data_dir() + "/models/falcon-a/" + f, folder / f);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(folder / "config.json"));
  cfg["architectures"] = {"Qwen2ForCausalLM"};
  cfg["model_type"] = "qwen2";
  std::ofstream(folder / "config.json") << cfg.dump();
  expect_one_error_line(gen(folder.string()), "Qwen2ForCausalLM with linear biases is not supported",
                        "bitnet quantization_config on Qwen2");
}
