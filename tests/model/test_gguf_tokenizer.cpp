// Tokenizers and chat templates from GGUF metadata against the Hugging Face goldens: the tiny tokenizer from the
// upstream-written fixture, and the real Llama 3 and Qwen3 tokenizers written here into GGUF metadata the way
// llama.cpp's converter writes them (tokens in id order, token types, "a b" merges, the pre-tokenizer name).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "core/error.h"
#include "gguf_test_util.h"
#include "model/gguf_tokenizer.h"
#include "model/model_files.h"

using namespace tritium;
using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

json read_json(const std::string& p) {
  std::ifstream in(p);
  return json::parse(in);
}

const json& golden() {
  static const json g = read_json(test::data_dir() + "/golden/tokenizer-golden.json");
  return g;
}

// The conversation the goldens' "chat" entries were rendered with.
ordered_json golden_messages() {
  return ordered_json::parse(R"([{"role":"system","content":"You are terse."},
    {"role":"user","content":"  What is 2+2?  "},{"role":"assistant","content":"4"},
    {"role":"user","content":"And 3+3?"}])");
}

void check_golden(const Tokenizer& tok, const std::string& key) {
  const auto& strings = golden()["strings"];
  const auto& gk = golden()[key];
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string s = strings[i].get<std::string>();
    EXPECT_EQ(tok.encode(s, false), gk["encode_plain"][i].get<std::vector<int32_t>>()) << key << " string " << i;
    EXPECT_EQ(tok.encode(s, true), gk["encode_add_special"][i].get<std::vector<int32_t>>()) << key << " string " << i;
    EXPECT_EQ(tok.decode(gk["encode_plain"][i].get<std::vector<int32_t>>(), false),
              gk["decode_roundtrip"][i].get<std::string>());
    EXPECT_EQ(tok.decode(gk["encode_add_special"][i].get<std::vector<int32_t>>(), true),
              gk["decode_roundtrip"][i].get<std::string>());
  }
}

void check_chat(const std::string& gguf, const std::string& key) {
  const ChatTemplateFiles files = load_model_chat_template(gguf);
  const ChatTemplate t = ChatTemplate::from_string(files.source);
  EXPECT_EQ(apply_chat_template(t, golden_messages(), true, files.bos_token, files.eos_token),
            golden()[key]["chat"].get<std::string>());
}

// A GGUF holding only the tokenizer of a Hugging Face tokenizer.json (+ tokenizer_config.json), as llama.cpp's
// converter writes it: added special tokens CONTROL (3), other added tokens USER_DEFINED (4), the rest NORMAL (1).
void write_tokenizer_gguf(const std::string& hf_dir, const std::string& pre, const std::string& out) {
  const json tj = read_json(hf_dir + "/tokenizer.json");
  const json cfg = read_json(hf_dir + "/tokenizer_config.json");
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto put = [&](int64_t id, const std::string& text, int32_t type) {
    if (tokens.size() <= static_cast<size_t>(id)) {
      tokens.resize(static_cast<size_t>(id) + 1);
      types.resize(static_cast<size_t>(id) + 1, 1);
    }
    tokens[static_cast<size_t>(id)] = text;
    types[static_cast<size_t>(id)] = type;
  };
  for (const auto& [text, id] : tj["model"]["vocab"].items()) put(id.get<int64_t>(), text, 1);
  for (const auto& a : tj["added_tokens"]) put(a["id"].get<int64_t>(), a["content"].get<std::string>(), a["special"].get<bool>() ? 3 : 4);
  std::vector<std::string> merges;
  for (const auto& m : tj["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  auto id_of = [&](const char* k) -> int64_t {
    if (!cfg.contains(k) || !cfg[k].is_string()) return -1;
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == cfg[k].get<std::string>()) return static_cast<int64_t>(i);
    return -1;
  };
  test::GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_strings("tokenizer.ggml.merges", merges);
  if (id_of("bos_token") >= 0) w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(id_of("bos_token")));
  if (id_of("eos_token") >= 0) w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(id_of("eos_token")));
  w.add_bool("tokenizer.ggml.add_bos_token", false);  // neither tokenizer.json has a BOS template
  if (cfg.contains("chat_template")) w.add_string("tokenizer.chat_template", cfg["chat_template"].get<std::string>());
  test::write_bytes(out, w.bytes());
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(GgufTokenizer, TinyFixtureMatchesHfGoldenAndChatTemplate) {
  REQUIRE_GGUF_FIXTURES(dir);
  const std::string gguf = dir + "/tiny-bitnet-I2_S.gguf";
  const auto tok = load_model_tokenizer(gguf);
  check_golden(*tok, "tiny");
  EXPECT_EQ(tok->vocab_size(), 8192);
  EXPECT_EQ(tok->bos_id(), 0);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_TRUE(tok->adds_bos());
  EXPECT_TRUE(tok->is_special(2));
  EXPECT_FALSE(tok->is_special(5));
  check_chat(gguf, "tiny");
  const ChatTemplateFiles files = load_model_chat_template(gguf);
  const auto jinja = test::read_bytes(test::bundled_model() + "/chat_template.jinja");
  EXPECT_EQ(files.source, std::string(jinja.begin(), jinja.end()));
  EXPECT_EQ(files.bos_token, "<|begin_of_text|>");
  EXPECT_EQ(files.eos_token, "<|end_of_text|>");
  EXPECT_EQ(files.origin, gguf + ":tokenizer.chat_template");
  // The pre-tokenizer written for llama-bpe is the tiny tokenizer.json's own.
  const json hf = read_json(test::bundled_model() + "/tokenizer.json");
  const json j = gguf_tokenizer_json(GgufFile::open(gguf));
  EXPECT_EQ(j["pre_tokenizer"], hf["pre_tokenizer"]);
  EXPECT_EQ(j["model"]["ignore_merges"], hf["model"]["ignore_merges"]);
}

TEST(GgufTokenizer, Llama3FromGgufMetadataMatchesHfGolden) {
  REQUIRE_SHARED_DATA(s);
  test::TempDir d;
  write_tokenizer_gguf(s + "/tokenizers/llama3", "llama-bpe", d.file("llama3.gguf"));
  const auto tok = load_model_tokenizer(d.file("llama3.gguf"));
  EXPECT_EQ(tok->vocab_size(), 128256);
  check_golden(*tok, "llama3");
  check_chat(d.file("llama3.gguf"), "llama3");
  EXPECT_EQ(gguf_tokenizer_json(GgufFile::open(d.file("llama3.gguf")))["pre_tokenizer"],
            read_json(s + "/tokenizers/llama3/tokenizer.json")["pre_tokenizer"]);
}

TEST(GgufTokenizer, Qwen3FromGgufMetadataMatchesHfGolden) {
  REQUIRE_SHARED_DATA(s);
  test::TempDir d;
  write_tokenizer_gguf(s + "/tokenizers/qwen3", "qwen2", d.file("qwen3.gguf"));
  const auto tok = load_model_tokenizer(d.file("qwen3.gguf"));
  EXPECT_EQ(tok->vocab_size(), 151669);
  check_golden(*tok, "qwen3");
  check_chat(d.file("qwen3.gguf"), "qwen3");
  EXPECT_FALSE(tok->is_special(151667));  // <think> is user-defined: not special, still matched whole
  EXPECT_EQ(tok->encode("a<think>b", false), (std::vector<int32_t>{64, 151667, 65}));
  const json j = gguf_tokenizer_json(GgufFile::open(d.file("qwen3.gguf")));
  const json hf = read_json(s + "/tokenizers/qwen3/tokenizer.json");
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][0], hf["pre_tokenizer"]["pretokenizers"][0]);
  EXPECT_EQ(j["normalizer"], hf["normalizer"]);
}

TEST(GgufTokenizer, MetadataErrorsNameTheKey) {
  auto with = [](auto edit) {
    test::GgufWriter w;
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_strings("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>"});
    w.add_i32s("tokenizer.ggml.token_type", {1, 1, 1, 3});
    w.add_strings("tokenizer.ggml.merges", {"a b"});
    edit(w);
    const auto b = w.bytes();
    const GgufFile f = GgufFile::parse(b.data(), b.size(), "t.gguf");
    return error_of([&] { gguf_tokenizer(f); });
  };
  EXPECT_EQ(with([](test::GgufWriter&) {}), "(no error)");
  EXPECT_EQ(with([](test::GgufWriter& w) { w.add_string("tokenizer.ggml.pre", "jais"); }),
            "t.gguf: tokenizer.ggml.pre 'jais' is not supported (supported: llama-bpe, qwen2, default)");
  EXPECT_EQ(with([](test::GgufWriter& w) { w.add_bool("tokenizer.ggml.add_bos_token", true); }),
            "t.gguf: tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is missing");
  EXPECT_EQ(with([](test::GgufWriter& w) { w.add_u32("tokenizer.ggml.bos_token_id", 4); }),
            "t.gguf: metadata 'tokenizer.ggml.bos_token_id' is 4, but there are 4 tokens");
  EXPECT_EQ(with([](test::GgufWriter& w) { w.add_string("tokenizer.ggml.eos_token_id", "3"); }),
            "t.gguf: metadata 'tokenizer.ggml.eos_token_id' has type STRING, expected an integer");
  {
    test::GgufWriter w;
    w.add_string("tokenizer.ggml.model", "llama");
    const auto b = w.bytes();
    EXPECT_EQ(error_of([&] { gguf_tokenizer(GgufFile::parse(b.data(), b.size(), "t.gguf")); }),
              "t.gguf: tokenizer.ggml.model 'llama' is not supported (tritium reads 'gpt2', byte-level BPE)");
  }
  {
    test::GgufWriter w;
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_strings("tokenizer.ggml.tokens", {"a", "b"});
    w.add_i32s("tokenizer.ggml.token_type", {1});
    w.add_strings("tokenizer.ggml.merges", {});
    const auto b = w.bytes();
    EXPECT_EQ(error_of([&] { gguf_tokenizer(GgufFile::parse(b.data(), b.size(), "t.gguf")); }),
              "t.gguf: tokenizer.ggml.token_type has 1 entries for 2 tokens");
  }
  {  // a merge of tokens that are not in the vocabulary: the BPE model's own error, naming the file
    test::GgufWriter w;
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_strings("tokenizer.ggml.tokens", {"a", "b"});
    w.add_strings("tokenizer.ggml.merges", {"a c"});
    const auto b = w.bytes();
    const std::string e = error_of([&] { gguf_tokenizer(GgufFile::parse(b.data(), b.size(), "t.gguf")); });
    EXPECT_EQ(e.rfind("t.gguf: tokenizer metadata: model", 0), 0u) << e;
  }
  {  // no template
    test::GgufWriter w;
    const auto b = w.bytes();
    EXPECT_EQ(error_of([&] { gguf_chat_template(GgufFile::parse(b.data(), b.size(), "t.gguf")); }),
              "no chat template in t.gguf (looked for metadata 'tokenizer.chat_template')");
  }
}
