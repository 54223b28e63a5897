#include "tokenizer/post_processor.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tritium {
namespace {

void append_template(const nlohmann::json& j, const std::string& where, PostProcessor& pp) {
  if (!j.contains("single") || !j["single"].is_array()) fail("{}.single: expected an array", where);
  const auto& specials = j.value("special_tokens", nlohmann::json::object());
  bool seen_a = false;
  for (size_t i = 0; i < j["single"].size(); ++i) {
    const auto& item = j["single"][i];
    const std::string iw = fmt::format("{}.single[{}]", where, i);
    if (item.contains("Sequence")) {
      if (seen_a) fail("{}: sequence A appears twice", iw);
      seen_a = true;
    } else if (item.contains("SpecialToken") && item["SpecialToken"].contains("id") && item["SpecialToken"]["id"].is_string()) {
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
        fail("{}: special token \"{}\" has no ids in special_tokens", iw, name);
      auto& dst = seen_a ? pp.suffix : pp.prefix;
      for (const auto& id : specials[name]["ids"]) {
        if (!id.is_number_integer()) fail("{}.special_tokens[\"{}\"].ids: expected integers", where, name);
        dst.push_back(id.get<int32_t>());
      }
    } else {
      fail("{}: expected a Sequence or SpecialToken item", iw);
    }
  }
  if (!seen_a) fail("{}.single: no Sequence item", where);
}

int32_t pair_id(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2 || !j[key][1].is_number_integer())
    fail("{}.{}: expected [token, id]", where, key);
  return j[key][1].get<int32_t>();
}

void append(const nlohmann::json& j, const std::string& where, PostProcessor& pp) {
  if (j.is_null()) return;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) fail("{}: expected an object with a type", where);
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "TemplateProcessing") return append_template(j, where, pp);
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    pp.prefix.push_back(pair_id(j, "cls", where));
    pp.suffix.push_back(pair_id(j, "sep", where));
    return;
  }
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array()) fail("{}.processors: expected an array", where);
    for (size_t i = 0; i < j["processors"].size(); ++i)
      append(j["processors"][i], fmt::format("{}.processors[{}]", where, i), pp);
    return;
  }
  fail("{}: unsupported post_processor type '{}'", where, type);
}

}  // namespace

PostProcessor make_post_processor(const nlohmann::json& j, const std::string& where) {
  PostProcessor pp;
  append(j, where, pp);
  return pp;
}

}  // namespace tritium
