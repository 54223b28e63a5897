#include "model/gguf_tokenizer.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/model_config.h"
#include "model/gguf_config.h"

namespace fs = std::filesystem;

namespace tritium {
namespace {

using json = nlohmann::json;

// llama.cpp's token types (llama_token_type).
constexpr int64_t kControl = 3, kUserDefined = 4;

// The pre-tokenizer regexes exactly as Hugging Face's tokenizer.json files write them.
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

enum class Pre { kLlama3, kQwen2, kGpt2 };

Pre parse_pre(const GgufFile& f) {
  const std::string pre = f.find_string("tokenizer.ggml.pre").value_or("default");
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") return Pre::kLlama3;
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return Pre::kQwen2;
  if (pre == "default" || pre == "gpt-2") return Pre::kGpt2;
  fail("{}: tokenizer.ggml.pre '{}' is not supported (supported: llama-bpe, qwen2, default)", f.path(), pre);
}

json split_then_byte_level(const char* regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           json::array({{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}})}};
}

// A special id key, checked against the token list.
std::optional<int64_t> special_id(const GgufFile& f, const char* key, size_t n_tokens) {
  const auto id = f.find_uint(key);
  if (id && *id >= n_tokens) fail("{}: metadata '{}' is {}, but there are {} tokens", f.path(), key, *id, n_tokens);
  return id ? std::optional<int64_t>(static_cast<int64_t>(*id)) : std::nullopt;
}

struct Specials {
  std::optional<int64_t> bos, eos;
  bool add_bos = false, add_eos = false;
};

Specials specials(const GgufFile& f, Pre pre, size_t n_tokens) {
  Specials s;
  s.bos = special_id(f, "tokenizer.ggml.bos_token_id", n_tokens);
  s.eos = special_id(f, "tokenizer.ggml.eos_token_id", n_tokens);
  s.add_bos = f.find_bool("tokenizer.ggml.add_bos_token").value_or(pre == Pre::kLlama3);
  s.add_eos = f.find_bool("tokenizer.ggml.add_eos_token").value_or(false);
  if (s.add_bos && !s.bos) fail("{}: tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is missing", f.path());
  if (s.add_eos && !s.eos) fail("{}: tokenizer.ggml.add_eos_token is true but tokenizer.ggml.eos_token_id is missing", f.path());
  return s;
}

}  // namespace

json gguf_tokenizer_json(const GgufFile& f) {
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    fail("{}: tokenizer.ggml.model '{}' is not supported (tritium reads 'gpt2', byte-level BPE)", f.path(), model);
  const Pre pre = parse_pre(f);
  const std::vector<std::string_view> tokens = f.get_string_array("tokenizer.ggml.tokens");
  std::vector<int64_t> types;
  if (f.find("tokenizer.ggml.token_type")) {
    types = f.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != tokens.size())
      fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", f.path(), types.size(), tokens.size());
  }
  const Specials sp = specials(f, pre, tokens.size());

  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    const int64_t type = types.empty() ? 1 : types[id];
    const std::string text(tokens[id]);
    if (type == kControl || type == kUserDefined) {
      added.push_back({{"id", id}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type == kControl}});
    } else if (!vocab.contains(text)) {  // a repeated token string keeps its first id
      vocab[text] = id;
    }
  }
  json merges = json::array();
  for (std::string_view m : f.get_string_array("tokenizer.ggml.merges")) merges.push_back(std::string(m));

  json j = json::object();
  j["version"] = "1.0";
  j["added_tokens"] = added;
  j["normalizer"] = pre == Pre::kQwen2 ? json{{"type", "NFC"}} : json();
  j["pre_tokenizer"] = pre == Pre::kLlama3   ? split_then_byte_level(kLlama3Regex)
                       : pre == Pre::kQwen2 ? split_then_byte_level(kQwen2Regex)
                                            : json{{"type", "ByteLevel"}, {"add_prefix_space", false},
                                                   {"trim_offsets", true}, {"use_regex", true}};
  if (sp.add_bos || sp.add_eos) {
    json single = json::array(), st = json::object();
    auto special = [&](int64_t id) {
      const std::string name(tokens[static_cast<size_t>(id)]);
      st[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
      return json{{"SpecialToken", {{"id", name}, {"type_id", 0}}}};
    };
    if (sp.add_bos) single.push_back(special(*sp.bos));
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    if (sp.add_eos) single.push_back(special(*sp.eos));
    j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", st}};
  } else {
    j["post_processor"] = json();
  }
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"] = {{"type", "BPE"},         {"dropout", nullptr},      {"unk_token", nullptr},
                {"fuse_unk", false},     {"byte_fallback", false},  {"ignore_merges", pre == Pre::kLlama3},
                {"vocab", std::move(vocab)}, {"merges", std::move(merges)}};
  return j;
}

std::unique_ptr<Tokenizer> gguf_tokenizer(const GgufFile& f) {
  const json j = gguf_tokenizer_json(f);
  const size_t n = f.find("tokenizer.ggml.tokens")->size();
  const Pre pre = parse_pre(f);
  const Specials sp = specials(f, pre, n);
  auto id32 = [](std::optional<int64_t> v) { return v ? std::optional<int32_t>(static_cast<int32_t>(*v)) : std::nullopt; };
  return Tokenizer::from_json(j, f.path() + ": tokenizer metadata", id32(sp.bos), id32(sp.eos));
}

ChatTemplateFiles gguf_chat_template(const GgufFile& f, const std::string& name) {
  const std::string key = name == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + name;
  ChatTemplateFiles r;
  const auto src = f.find_string(key);
  if (!src) fail("no chat template in {} (looked for metadata '{}')", f.path(), key);
  r.source = *src;
  r.origin = f.path() + ":" + key;
  if (const GgufValue* toks = f.find("tokenizer.ggml.tokens")) {
    const std::vector<std::string_view> tokens = f.get_string_array("tokenizer.ggml.tokens");
    const Specials sp = specials(f, parse_pre(f), toks->size());
    if (sp.bos) r.bos_token = std::string(tokens[static_cast<size_t>(*sp.bos)]);
    if (sp.eos) r.eos_token = std::string(tokens[static_cast<size_t>(*sp.eos)]);
  }
  return r;
}

namespace {

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) fail("{}: cannot write", p.string());
}

}  // namespace

void write_gguf_side_files(const GgufFile& f, const std::string& dir) {
  const ModelConfig c = gguf_model_config(f);
  const fs::path d(dir);
  write_text(d / "config.json", model_config_to_json(c).dump(2) + "\n");
  json gen = json::object();
  if (c.bos_token_id) gen["bos_token_id"] = *c.bos_token_id;
  if (!c.eos_token_ids.empty()) gen["eos_token_id"] = c.eos_token_ids;
  write_text(d / "generation_config.json", gen.dump(2) + "\n");
  write_text(d / "tokenizer.json", gguf_tokenizer_json(f).dump() + "\n");
  const std::vector<std::string_view> tokens = f.get_string_array("tokenizer.ggml.tokens");
  const Specials sp = specials(f, parse_pre(f), tokens.size());
  json tc = json::object();
  if (sp.bos) tc["bos_token"] = std::string(tokens[static_cast<size_t>(*sp.bos)]);
  if (sp.eos) tc["eos_token"] = std::string(tokens[static_cast<size_t>(*sp.eos)]);
  write_text(d / "tokenizer_config.json", tc.dump(2) + "\n");
  if (auto t = f.find_string("tokenizer.chat_template")) write_text(d / "chat_template.jinja", *t);
}

}  // namespace tritium
