// Tokenizer::from_file: parses tokenizer.json (+ tokenizer_config.json beside it) into an HfTokenizer.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"

namespace tritium {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot open file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", path, e.what());
  }
}

std::vector<AddedToken> parse_added(const nlohmann::json& j, const std::string& where) {
  std::vector<AddedToken> out;
  if (j.is_null()) return out;
  if (!j.is_array()) fail("{}: expected an array", where);
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string w = fmt::format("{}[{}]", where, i);
    if (!e.is_object() || !e.contains("id") || !e["id"].is_number_integer() || !e.contains("content") ||
        !e["content"].is_string())
      fail("{}: expected an object with integer id and string content", w);
    AddedToken t;
    t.id = e["id"].get<int32_t>();
    if (t.id < 0) fail("{}.id: negative id {}", w, t.id);
    t.content = e["content"].get<std::string>();
    auto flag = [&](const char* k, bool d) { return e.contains(k) && e[k].is_boolean() ? e[k].get<bool>() : d; };
    t.special = flag("special", false);
    t.lstrip = flag("lstrip", false);
    t.rstrip = flag("rstrip", false);
    t.single_word = flag("single_word", false);
    t.normalized = flag("normalized", !t.special);
    out.push_back(std::move(t));
  }
  return out;
}

// bos_token / eos_token: a string, {"content": ...}, or null. Returns the token name, "" when null.
std::optional<std::string> special_name(const nlohmann::json& cfg, const char* key, const std::string& path) {
  if (!cfg.contains(key)) return std::nullopt;
  const auto& v = cfg[key];
  if (v.is_null()) return std::string();
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  fail("{}: {} must be a string or {{\"content\": ...}}", path, key);
}

}  // namespace

namespace {

std::unique_ptr<HfTokenizer> build(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) fail("{}: expected a JSON object at the top level", path);
  if (!j.contains("model")) fail("{}: missing field 'model'", path);
  HfTokenizerParts parts;
  try {
    parts.model = std::make_unique<BpeModel>(j["model"], path + ": model");
    parts.added = parse_added(j.value("added_tokens", nlohmann::json()), path + ": added_tokens");
    parts.normalizer = make_normalizer(j.value("normalizer", nlohmann::json()), path + ": normalizer");
    parts.pre_tokenizer = make_pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()), path + ": pre_tokenizer");
    parts.post = make_post_processor(j.value("post_processor", nlohmann::json()), path + ": post_processor");
    parts.decoder = make_decoder(j.value("decoder", nlohmann::json()), path + ": decoder");
  } catch (const nlohmann::json::exception& e) {  // a field of an unexpected JSON type
    fail("{}: malformed field: {}", path, e.what());
  }
  return std::make_unique<HfTokenizer>(std::move(parts));
}

// Without a configured BOS, the template's first added id is the BOS (e.g. TemplateProcessing [BOS, A]).
std::optional<int32_t> template_bos(const HfTokenizer& tok) {
  return tok.adds_bos() ? std::optional<int32_t>(tok.encode("", true).front()) : std::nullopt;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_file(const std::string& path) {
  auto tok = build(read_json(path), path);

  // bos/eos names from tokenizer_config.json beside the file.
  std::optional<std::string> bos_name, eos_name;
  const auto cfg_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    const nlohmann::json cfg = read_json(cfg_path.string());
    if (cfg.is_object()) {
      bos_name = special_name(cfg, "bos_token", cfg_path.string());
      eos_name = special_name(cfg, "eos_token", cfg_path.string());
    }
  }
  auto resolve = [&](const std::optional<std::string>& name, const char* key) -> std::optional<int32_t> {
    if (!name || name->empty()) return std::nullopt;
    auto id = tok->token_to_id(*name);
    if (!id) fail("{}: {} \"{}\" is not a token of {}", cfg_path.string(), key, *name, path);
    return id;
  };
  std::optional<int32_t> bos = resolve(bos_name, "bos_token"), eos = resolve(eos_name, "eos_token");
  if (!bos_name) bos = template_bos(*tok);
  tok->set_bos_eos(bos, eos);
  return tok;
}

std::unique_ptr<Tokenizer> Tokenizer::from_json(const nlohmann::json& j, const std::string& where,
                                                std::optional<int32_t> bos, std::optional<int32_t> eos) {
  auto tok = build(j, where);
  for (const auto& [id, key] : {std::pair{bos, "bos"}, std::pair{eos, "eos"}})
    if (id && tok->id_to_token(*id).empty()) fail("{}: {} id {} is not a token", where, key, *id);
  tok->set_bos_eos(bos ? bos : template_bos(*tok), eos);
  return tok;
}

}  // namespace tritium
