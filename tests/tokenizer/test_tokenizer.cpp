#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

using namespace tritium;
using nlohmann::json;

namespace {

const std::string kTinyPath = std::string(TRITIUM_SOURCE_DIR) + "/models/tiny-bitnet/tokenizer.json";

json load_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return json::parse(f);
}

const json& golden() {
  static const json g = load_json(std::string(TRITIUM_TESTS_DATA_DIR) + "/golden/tokenizer-golden.json");
  return g;
}

// Path of a shared tokenizer, or "" when TRITIUM_TEST_DATA is not available.
std::string shared_tokenizer(const std::string& name) {
  const char* root = std::getenv("TRITIUM_TEST_DATA");
  if (!root) return {};
  const std::string p = std::string(root) + "/tokenizers/" + name + "/tokenizer.json";
  return std::filesystem::exists(p) ? p : std::string();
}

const Tokenizer& tiny() {
  static const auto t = Tokenizer::from_file(kTinyPath);
  return *t;
}

// Loads a shared tokenizer once (timing the load), or nullptr when absent.
const Tokenizer* shared(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  const std::string p = shared_tokenizer(name);
  if (p.empty()) return nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  auto tok = Tokenizer::from_file(p);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ tokenizer ] loaded %s (%d ids) in %.0f ms\n", name.c_str(), tok->vocab_size(), ms);
  return (cache[name] = std::move(tok)).get();
}

void check_golden(const Tokenizer& tok, const std::string& key) {
  const json& g = golden();
  const auto& strings = g["strings"];
  const auto& gk = g[key];
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string s = strings[i].get<std::string>();
    const auto plain = gk["encode_plain"][i].get<std::vector<int32_t>>();
    const auto with_special = gk["encode_add_special"][i].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(s, false), plain) << key << " string " << i << ": " << s;
    EXPECT_EQ(tok.encode(s, true), with_special) << key << " string " << i << ": " << s;
    EXPECT_EQ(tok.decode(plain, false), gk["decode_roundtrip"][i].get<std::string>()) << key << " string " << i;
    EXPECT_EQ(tok.decode(with_special, true), gk["decode_roundtrip"][i].get<std::string>()) << key << " string " << i;
  }
}

// Feeds ids one by one to an IncrementalDecoder; checks every chunk is valid UTF-8 and the total matches.
void check_streaming(const Tokenizer& tok, const std::string& text, bool expect_split) {
  const auto ids = tok.encode(text, false);
  IncrementalDecoder dec(tok);
  std::string all;
  int empty_pushes = 0;
  for (int32_t id : ids) {
    const std::string chunk = dec.push(id);
    EXPECT_EQ(utf8::find_invalid(chunk), std::string_view::npos) << "split UTF-8 after id " << id;
    EXPECT_EQ(chunk.find("\xEF\xBF\xBD"), std::string::npos) << "U+FFFD emitted after id " << id;
    if (chunk.empty()) ++empty_pushes;
    all += chunk;
  }
  all += dec.flush();
  EXPECT_EQ(all, text);
  if (expect_split) {
    EXPECT_GT(empty_pushes, 0) << "no token ended inside a character: test is not exercising splits";
  }
}

std::string write_temp(const std::string& name, const std::string& content) {
  const auto dir = std::filesystem::path(testing::TempDir()) / ("tritium_tok_" + name);
  std::filesystem::create_directories(dir);
  const auto p = dir / "tokenizer.json";
  std::ofstream(p) << content;
  return p.string();
}

std::string load_error(const std::string& name, const std::string& content) {
  try {
    Tokenizer::from_file(write_temp(name, content));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Tokenizer, TinyGolden) { check_golden(tiny(), "tiny"); }

TEST(Tokenizer, Llama3Golden) {
  const Tokenizer* t = shared("llama3");
  if (!t) GTEST_SKIP() << "TRITIUM_TEST_DATA/tokenizers/llama3 not available";
  check_golden(*t, "llama3");
}

TEST(Tokenizer, Qwen3Golden) {
  const Tokenizer* t = shared("qwen3");
  if (!t) GTEST_SKIP() << "TRITIUM_TEST_DATA/tokenizers/qwen3 not available";
  check_golden(*t, "qwen3");
}

TEST(Tokenizer, TinyModelPromptIds) {
  const json g = load_json(std::string(TRITIUM_TESTS_DATA_DIR) + "/golden/tiny-bitnet.json");
  ASSERT_FALSE(g["prompts"].empty());
  for (const auto& p : g["prompts"]) {
    EXPECT_EQ(tiny().encode(p["text"].get<std::string>(), true), p["input_ids"].get<std::vector<int32_t>>())
        << p["text"];
  }
}

TEST(Tokenizer, SpecialIdsAndVocab) {
  EXPECT_EQ(tiny().vocab_size(), 8192);
  EXPECT_EQ(tiny().bos_id(), 0);
  EXPECT_EQ(tiny().eos_id(), 1);
  EXPECT_TRUE(tiny().adds_bos());
  EXPECT_TRUE(tiny().is_special(2));
  EXPECT_FALSE(tiny().is_special(44));
  EXPECT_EQ(tiny().token_to_id("<|eot_id|>"), 2);
  EXPECT_EQ(tiny().id_to_token(2), "<|eot_id|>");
  EXPECT_EQ(tiny().id_to_token(-1), "");
  EXPECT_EQ(tiny().id_to_token(1 << 20), "");
  EXPECT_FALSE(tiny().token_to_id("no such token"));
  if (const Tokenizer* t = shared("llama3")) {
    EXPECT_EQ(t->vocab_size(), 128256);
    EXPECT_EQ(t->bos_id(), 128000);
    EXPECT_EQ(t->eos_id(), 128001);
    EXPECT_FALSE(t->adds_bos());  // this tokenizer.json has no TemplateProcessing
  }
  if (const Tokenizer* t = shared("qwen3")) {
    EXPECT_EQ(t->vocab_size(), 151669);
    EXPECT_FALSE(t->bos_id());  // bos_token: null
    EXPECT_EQ(t->eos_id(), 151645);
    EXPECT_FALSE(t->adds_bos());
    EXPECT_FALSE(t->is_special(151667));  // <think> is added but not special
    EXPECT_TRUE(t->is_special(151644));
  }
}

TEST(Tokenizer, AddedTokensMatchedBeforePreTokenization) {
  const std::string chat = golden()["tiny"]["chat"].get<std::string>();
  for (bool add : {false, true}) {
    const auto ids = tiny().encode(chat, add);
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ(ids[0], 0);  // <|begin_of_text|> is in the text; with add=true the template adds another
    if (add) {
      EXPECT_EQ(ids[1], 0);
    }
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 4) << "four <|eot_id|>";
    EXPECT_EQ(tiny().decode(ids, false), add ? "<|begin_of_text|>" + chat : chat);
  }
  // Longest match wins, and text glued to a token is tokenized on its own.
  const auto ids = tiny().encode("a<|eot_id|>b", false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(tiny().decode(ids, true), "ab");

  if (const Tokenizer* q = shared("qwen3")) {
    const std::string qchat = golden()["qwen3"]["chat"].get<std::string>();
    const auto qids = q->encode(qchat, false);
    EXPECT_EQ(qids.front(), 151644);  // <|im_start|>
    EXPECT_EQ(std::count(qids.begin(), qids.end(), 151645), 4);  // <|im_end|>
    EXPECT_EQ(q->decode(qids, false), qchat);
    const auto think = q->encode("<think>\nhmm</think>", false);
    EXPECT_EQ(think.front(), 151667);
    EXPECT_EQ(think.back(), 151668);
    EXPECT_EQ(q->decode(think, true), "<think>\nhmm</think>");  // not special: kept
  }
}

TEST(Tokenizer, InvalidUtf8InputThrows) {
  const std::pair<std::string, size_t> cases[] = {
      {"ab\xff", 2}, {"\xe4\xb8", 0}, {"ok \xed\xa0\x80", 3}, {"\xc0\xaf", 0}, {"x\xf4\x90\x80\x80", 1}, {"é\x80", 2}};
  for (const auto& [text, at] : cases) {
    try {
      tiny().encode(text, false);
      ADD_FAILURE() << "no error for byte " << at;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), fmt::format("invalid UTF-8 in input at byte {}", at));
    }
  }
}

TEST(Tokenizer, DecodeInvalidBytesBecomesReplacementChar) {
  auto byte_id = [](uint8_t b) { return *tiny().token_to_id(byte_level::encode(std::string(1, static_cast<char>(b)))); };
  // A lone lead byte, then 'a': one U+FFFD per maximal invalid subpart.
  EXPECT_EQ(tiny().decode({byte_id(0xE6), byte_id(0x97), byte_id('a')}, false), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(tiny().decode({byte_id(0xFF), byte_id(0xE6)}, false), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8::lossy("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogates: per byte
  EXPECT_EQ(utf8::lossy("\xf0\x9f\x91"), "\xEF\xBF\xBD");                           // truncated: one
}

TEST(Tokenizer, IncrementalDecoderNeverSplitsCharacters) {
  const std::string text = "emoji 👍🏽 and 👨‍👩‍👧 family, 日本語のテキスト, naïve";
  check_streaming(tiny(), text, true);
  if (const Tokenizer* t = shared("llama3")) {
    check_streaming(*t, text, true);
    check_streaming(*t, "Привет 🤖🦀🧬 中文文本", true);
  }
  if (const Tokenizer* t = shared("qwen3")) check_streaming(*t, text, false);
  // Special tokens: skipped by default, kept when asked.
  IncrementalDecoder keep(tiny(), false), skip(tiny());
  std::string a, b;
  for (int32_t id : tiny().encode("<|eot_id|>日本", true)) {
    a += keep.push(id);
    b += skip.push(id);
  }
  EXPECT_EQ(a + keep.flush(), "<|begin_of_text|><|eot_id|>日本");
  EXPECT_EQ(b + skip.flush(), "日本");
  // A dangling lead byte comes out as U+FFFD at flush.
  IncrementalDecoder d(tiny());
  EXPECT_EQ(d.push(*tiny().token_to_id(byte_level::encode("\xe6"))), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");
}

TEST(Tokenizer, MalformedFilesGiveClearErrors) {
  EXPECT_NE(load_error("nomodel", R"({"added_tokens": []})").find("missing field 'model'"), std::string::npos);
  EXPECT_NE(load_error("badjson", R"({"model": )").find("invalid JSON"), std::string::npos);
  const std::string merge_err =
      load_error("badmerge", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]}})");
  EXPECT_NE(merge_err.find("model.merges[0]: token \"c\" is not in the vocab"), std::string::npos) << merge_err;
  const std::string merge_err2 =
      load_error("badmerge2", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})");
  EXPECT_NE(merge_err2.find("merged token \"ab\" is not in the vocab"), std::string::npos) << merge_err2;
  const std::string merge_err3 =
      load_error("badmerge3", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [42]}})");
  EXPECT_NE(merge_err3.find("model.merges[0]: expected"), std::string::npos) << merge_err3;
  const std::string vocab_err = load_error("novocab", R"({"model": {"type": "BPE", "merges": []}})");
  EXPECT_NE(vocab_err.find("model.vocab: missing"), std::string::npos) << vocab_err;
  const std::string pre_err = load_error(
      "badpre", R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Whatever"}})");
  EXPECT_NE(pre_err.find("unsupported pre_tokenizer type 'Whatever'"), std::string::npos) << pre_err;
  const std::string re_err = load_error(
      "badre",
      R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"}})");
  EXPECT_NE(re_err.find("bad regex"), std::string::npos) << re_err;
  EXPECT_NE(load_error("wordpiece", R"({"model": {"type": "WordPiece", "vocab": {}}})").find("unsupported model type"),
            std::string::npos);
  EXPECT_NE(load_error("missing", "").find("invalid JSON"), std::string::npos);
  try {
    Tokenizer::from_file("/nonexistent/tokenizer.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
}

TEST(Tokenizer, MinimalBpeMergesAsPairsAndStrings) {
  // Two spellings of the same merges; "aaa" exercises leftmost-first on equal ranks.
  for (const char* merges : {R"(["a a", "aa a"])", R"([["a", "a"], ["aa", "a"]])"}) {
    const std::string j = std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "aa": 1, "aaa": 2, "b": 3}, "merges": )") +
                          merges + "}}";
    auto t = Tokenizer::from_file(write_temp("mini", j));
    EXPECT_EQ(t->encode("aaaa", false), (std::vector<int32_t>{1, 1}));
    EXPECT_EQ(t->encode("aaa", false), (std::vector<int32_t>{2}));
    EXPECT_EQ(t->encode("aab", false), (std::vector<int32_t>{1, 3}));
    EXPECT_EQ(t->decode({1, 3}, false), "aa b");  // no decoder: HF joins with spaces
    EXPECT_FALSE(t->adds_bos());
    EXPECT_FALSE(t->bos_id());
  }
}

TEST(Tokenizer, NfcNormalizer) {
  auto n = make_normalizer(json{{"type", "NFC"}}, "test");
  EXPECT_EQ(n->normalize("cafe\xcc\x81"), "caf\xc3\xa9");
  EXPECT_EQ(n->normalize("plain ascii"), "plain ascii");
  EXPECT_EQ(n->normalize("\xea\xb0\x80"), "\xea\xb0\x80");  // precomposed Hangul stays
  EXPECT_EQ(n->normalize("\xe1\x84\x80\xe1\x85\xa1"), "\xea\xb0\x80");  // conjoining jamo compose
  if (const Tokenizer* q = shared("qwen3")) {
    EXPECT_EQ(q->encode("cafe\xcc\x81", false), q->encode("café", false));
  }
}

TEST(Tokenizer, SplitBehaviors) {
  auto run = [](const std::string& behavior, bool invert = false) {
    auto p = make_pre_tokenizer(
        json{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}}, "test");
    std::vector<std::string> pieces{"the-final--countdown"};
    p->apply(pieces);
    return pieces;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(run("Removed"), (V{"the", "final", "countdown"}));
  EXPECT_EQ(run("Isolated"), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(run("MergedWithPrevious"), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(run("MergedWithNext"), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(run("Contiguous"), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(run("Removed", true), (V{"-", "-", "-"}));

  auto bl = make_pre_tokenizer(json{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}, "test");
  std::vector<std::string> pieces{"Hello world's 42"};
  bl->apply(pieces);
  EXPECT_EQ(pieces, (V{"ĠHello", "Ġworld", "'s", "Ġ42"}));
}

TEST(Tokenizer, LongRunsRoundTrip) {
  // Long single pre-tokens (a 210k-letter word, a 200k-space run, 50k CJK chars) stress the BPE heap and
  // the regex; byte-level BPE is lossless, so decode must give the input back.
  std::string word, spaces = "x" + std::string(200000, ' ') + "y", cjk;
  for (int i = 0; i < 70000; ++i) word += "the";
  for (int i = 0; i < 50000; ++i) cjk += "語";
  for (const std::string* s : {&word, &spaces, &cjk}) {
    const auto ids = tiny().encode(*s, false);
    if (s != &cjk) {
      EXPECT_LT(ids.size(), s->size() / 2);  // merges did happen
    }
    EXPECT_EQ(tiny().decode(ids, false), *s);
  }
}

TEST(Tokenizer, AddedTokenFlags) {
  // Letters + space as a char-level vocab; added tokens exercise lstrip / rstrip / single_word / normalized.
  const std::string j = R"({
    "normalizer": {"type": "NFC"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, " ": 2, "c": 3, "t": 4, "e": 5, "\u0301": 6}, "merges": []},
    "added_tokens": [
      {"id": 10, "content": "<l>", "lstrip": true, "special": true},
      {"id": 11, "content": "<r>", "rstrip": true, "special": true},
      {"id": 12, "content": "cat", "single_word": true, "normalized": false},
      {"id": 13, "content": "\u00e9", "normalized": true},
      {"id": 14, "content": "<l><r>", "special": true}
    ]})";
  auto t = Tokenizer::from_file(write_temp("flags", j));
  using V = std::vector<int32_t>;
  EXPECT_EQ(t->encode("a  <l>b", false), (V{0, 10, 1}));
  EXPECT_EQ(t->encode("a<r>  b", false), (V{0, 11, 1}));
  EXPECT_EQ(t->encode("a <r> b", false), (V{0, 2, 11, 1}));
  EXPECT_EQ(t->encode("a cat b", false), (V{0, 2, 12, 2, 1}));
  EXPECT_EQ(t->encode("acat", false), (V{0, 3, 0, 4}));  // inside a word: not matched
  EXPECT_EQ(t->encode("e\xcc\x81", false), (V{13}));     // NFC first, then the normalized added token
  EXPECT_EQ(t->encode("<l><r>", false), (V{14}));        // longest match wins
  EXPECT_EQ(t->decode({0, 10, 13, 1}, true), "a é b");  // no decoder: tokens joined with spaces
  EXPECT_EQ(t->vocab_size(), 15);
}
