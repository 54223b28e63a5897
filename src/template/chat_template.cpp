// tritium chat templates: public API over the template engine, and the model-folder loader.
#include "template/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "template/parser.h"
#include "template/renderer.h"

namespace tritium {

nlohmann::ordered_json ChatMessage::to_json() const {
  nlohmann::ordered_json j = {{"role", role}, {"content", content}};
  if (reasoning_content) j["reasoning_content"] = *reasoning_content;
  if (!tool_calls.is_null()) j["tool_calls"] = tool_calls;
  if (name) j["name"] = *name;
  if (tool_call_id) j["tool_call_id"] = *tool_call_id;
  return j;
}

nlohmann::ordered_json messages_to_json(const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& m : messages) a.push_back(m.to_json());
  return a;
}

ChatTemplate ChatTemplate::from_string(std::string source) {
  ChatTemplate t;
  t.body_ = std::make_shared<const tmpl::Body>(tmpl::parse_template(source));
  t.source_ = std::move(source);
  return t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  if (!body_) fail("chat template: render() on an empty ChatTemplate (use ChatTemplate::from_string)");
  if (!context.is_object() && !context.is_null()) fail("chat template: render context must be a JSON object");
  return tmpl::render_template(*body_, tmpl::Value::from_json(context.is_null() ? nlohmann::ordered_json::object() : context));
}

std::string apply_chat_template(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                bool add_generation_prompt, const std::string& bos_token,
                                const std::string& eos_token, const nlohmann::ordered_json& tools,
                                const nlohmann::ordered_json& extra) {
  if (!messages.is_array()) fail("apply_chat_template: messages must be a JSON array, got {}", messages.type_name());
  if (!extra.is_null() && !extra.is_object()) fail("apply_chat_template: extra kwargs must be a JSON object");
  nlohmann::ordered_json ctx = {{"messages", messages},
                                {"tools", tools},
                                {"documents", nullptr},
                                {"add_generation_prompt", add_generation_prompt},
                                {"bos_token", bos_token},
                                {"eos_token", eos_token}};
  if (extra.is_object())
    for (const auto& [k, v] : extra.items()) ctx[k] = v;
  return tmpl.render(ctx);
}

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("cannot read {}", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json read_json(const std::filesystem::path& p) {
  try {
    return nlohmann::ordered_json::parse(read_text(p));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", p.string(), e.what());
  }
}

std::string token_text(const nlohmann::ordered_json& cfg, const char* key, const std::filesystem::path& file) {
  if (!cfg.contains(key) || cfg[key].is_null()) return "";
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  fail("{}: field '{}' must be a string or {{\"content\": ...}}", file.string(), key);
}

}  // namespace

ChatTemplateFiles load_chat_template(const std::filesystem::path& model_dir, const std::string& name) {
  ChatTemplateFiles r;
  const auto cfg_path = model_dir / "tokenizer_config.json";
  nlohmann::ordered_json cfg;
  if (std::filesystem::exists(cfg_path)) {
    cfg = read_json(cfg_path);
    if (!cfg.is_object()) fail("{}: expected a JSON object", cfg_path.string());
    r.bos_token = token_text(cfg, "bos_token", cfg_path);
    r.eos_token = token_text(cfg, "eos_token", cfg_path);
  }
  if (const auto jinja = model_dir / "chat_template.jinja"; std::filesystem::exists(jinja)) {
    r.source = read_text(jinja);
    r.origin = jinja.string();
    return r;
  }
  if (cfg.is_object() && cfg.contains("chat_template") && !cfg["chat_template"].is_null()) {
    const auto& ct = cfg["chat_template"];
    if (ct.is_string()) {
      r.source = ct.get<std::string>();
      r.origin = cfg_path.string() + ":chat_template";
      return r;
    }
    if (ct.is_array()) {
      std::string names;
      for (const auto& e : ct) {
        if (!e.is_object() || !e.contains("name") || !e.contains("template") || !e["name"].is_string() ||
            !e["template"].is_string())
          fail("{}: chat_template list entries must be {{\"name\": str, \"template\": str}}", cfg_path.string());
        if (e["name"] == name) {
          r.source = e["template"].get<std::string>();
          r.origin = cfg_path.string() + ":chat_template[" + name + "]";
          return r;
        }
        names += (names.empty() ? "" : ", ") + e["name"].get<std::string>();
      }
      fail("{}: no chat template named '{}' (have: {})", cfg_path.string(), name, names);
    }
    fail("{}: chat_template must be a string or a list of {{name, template}}", cfg_path.string());
  }
  if (const auto pj = model_dir / "chat_template.json"; std::filesystem::exists(pj)) {
    auto j = read_json(pj);
    if (!j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string())
      fail("{}: expected {{\"chat_template\": string}}", pj.string());
    r.source = j["chat_template"].get<std::string>();
    r.origin = pj.string();
    return r;
  }
  fail("no chat template in {} (looked for chat_template.jinja, tokenizer_config.json:chat_template, "
       "chat_template.json)",
       model_dir.string());
}

}  // namespace tritium
