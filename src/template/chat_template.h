// tritium chat templates: render Hugging Face chat templates (the Jinja2 subset they use) byte-identically
// to transformers' apply_chat_template, and find a model's template on disk.
//
// BOS: templates such as Llama 3's write bos_token themselves, so the rendered text already starts with
// exactly one BOS. Encode the rendered prompt with add_special_tokens=false — never a second BOS.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tritium {

namespace tmpl {
struct Stmt;
}

/// One chat turn. Optional fields are written into the message dict only when set.
struct ChatMessage {
  std::string role;     ///< "system", "user", "assistant", "tool"
  std::string content;
  std::optional<std::string> reasoning_content;  ///< assistant thinking text (Qwen3 renders it in <think>)
  nlohmann::ordered_json tool_calls;             ///< null = absent; else a list of {"type","function":{"name","arguments"}}
  std::optional<std::string> name;               ///< tool name (some templates use it for role "tool")
  std::optional<std::string> tool_call_id;

  /// The message as the dict the template sees (keys in the order above; content always present).
  nlohmann::ordered_json to_json() const;
};

/// A list of messages as the JSON array apply_chat_template expects.
nlohmann::ordered_json messages_to_json(const std::vector<ChatMessage>& messages);

/// A parsed chat template; immutable and safe to render from several threads at once.
class ChatTemplate {
 public:
  /// Parses Jinja2 source with HF's settings (trim_blocks, lstrip_blocks, no trailing newline kept).
  /// Throws tritium::Error "chat template syntax error at line L, column C: ..." on malformed input.
  static ChatTemplate from_string(std::string source);

  /// Renders with the given variables (a JSON object; dict key order is kept, which tojson shows).
  /// Throws tritium::Error on evaluation errors (naming line and column) and for raise_exception(msg)
  /// (what() is msg exactly: the template's own message, e.g. to return to an API client).
  std::string render(const nlohmann::ordered_json& context) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const std::vector<std::unique_ptr<tmpl::Stmt>>> body_;
};

/// transformers' apply_chat_template(messages, tools=tools, add_generation_prompt=..., tokenize=False):
/// renders with messages, tools (None when null), documents (None), add_generation_prompt, bos_token,
/// eos_token, then every key of `extra` (an object or null; e.g. {"enable_thinking": false}; extra keys
/// override the others). The result starts with BOS when the template writes it: encode it with
/// add_special_tokens=false (never a second BOS). Throws tritium::Error as ChatTemplate::render.
std::string apply_chat_template(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                bool add_generation_prompt, const std::string& bos_token,
                                const std::string& eos_token, const nlohmann::ordered_json& tools = nullptr,
                                const nlohmann::ordered_json& extra = nullptr);

/// A model folder's chat template and the special tokens templates refer to.
struct ChatTemplateFiles {
  std::string source;     ///< Jinja2 source
  std::string origin;     ///< the file (and field) it came from, for messages
  std::string bos_token;  ///< from tokenizer_config.json ("" when absent or null)
  std::string eos_token;
};

/// Finds the chat template of a Hugging Face model folder, in transformers' order: chat_template.jinja
/// (newer layout), then the "chat_template" field of tokenizer_config.json (a string, or a list of
/// {"name", "template"} from which `name` is taken, "default" by default), then chat_template.json
/// ({"chat_template": "..."}). bos/eos come from tokenizer_config.json (a string or {"content": ...}).
/// Throws tritium::Error naming the folder when there is no template, or the file/field when malformed.
ChatTemplateFiles load_chat_template(const std::filesystem::path& model_dir, const std::string& name = "default");

}  // namespace tritium
