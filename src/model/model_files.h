// tritium model: a model's tokenizer and chat template wherever the model keeps them: tokenizer.json and the
// template files of a Hugging Face / tritium folder, or the metadata of a GGUF file (model/gguf_tokenizer.h).
#pragma once

#include <memory>
#include <string>

#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tritium {

/// The tokenizer of a model folder (its tokenizer.json) or of a GGUF file. Throws tritium::Error naming the file.
std::unique_ptr<Tokenizer> load_model_tokenizer(const std::string& model_path);

/// The chat template of a model folder (template/chat_template.h load_chat_template) or of a GGUF file.
ChatTemplateFiles load_model_chat_template(const std::string& model_path, const std::string& name = "default");

}  // namespace tritium
