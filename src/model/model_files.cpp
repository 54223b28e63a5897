#include "model/model_files.h"

#include <filesystem>

#include "core/error.h"
#include "model/gguf_config.h"
#include "model/gguf_tokenizer.h"

namespace tritium {

std::unique_ptr<Tokenizer> load_model_tokenizer(const std::string& model_path) {
  if (is_gguf_path(model_path)) return gguf_tokenizer(GgufFile::open(model_path));
  const std::filesystem::path tj = std::filesystem::path(model_path) / "tokenizer.json";
  if (!std::filesystem::exists(tj)) fail("{}: not found (the model folder needs tokenizer.json)", tj.string());
  return Tokenizer::from_file(tj.string());
}

ChatTemplateFiles load_model_chat_template(const std::string& model_path, const std::string& name) {
  if (is_gguf_path(model_path)) return gguf_chat_template(GgufFile::open(model_path), name);
  return load_chat_template(model_path, name);
}

}  // namespace tritium
