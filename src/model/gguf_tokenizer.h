// tritium model: the tokenizer and chat template a GGUF file carries, and the Hugging Face side files (config,
// tokenizer, template) that stand for them in a folder (`tritium convert -m FILE.gguf`).
//
// Tokenizer (llama.cpp's keys): tokenizer.ggml.model must be "gpt2" (byte-level BPE); tokenizer.ggml.tokens (id
// order), tokenizer.ggml.token_type (1 normal, 3 control, 4 user-defined, ...; absent: all normal),
// tokenizer.ggml.merges ("a b"), tokenizer.ggml.pre, bos/eos_token_id, add_bos_token / add_eos_token. They become
// the tokenizer.json that Hugging Face writes for the same tokenizer:
//  - vocab: every token that is not control or user-defined; merges ranked in file order;
//  - added tokens: control tokens as special, user-defined ones as non-special (both matched in the raw text
//    before pre-tokenization, as Hugging Face and llama.cpp do);
//  - pre-tokenizer by tokenizer.ggml.pre: "llama-bpe" (also "llama3", "llama-v3": Llama 3's Split regex, then
//    ByteLevel; ignore_merges as Llama 3's tokenizer.json), "qwen2" (also "deepseek-r1-qwen": Qwen2's regex, digits
//    one by one, NFC normalization as Qwen2's tokenizer.json), "default" (also "gpt-2", and when the key is absent:
//    GPT-2's ByteLevel regex; llama.cpp's own "default" adds splits of punctuation and digit runs that Hugging Face
//    GPT-2 tokenizers do not have);
//  - post-processor: BOS prepended when add_bos_token (absent: true for llama-bpe, false otherwise, as
//    llama.cpp), EOS appended when add_eos_token; ByteLevel decoder.
// Chat template: tokenizer.chat_template (or tokenizer.chat_template.<name>), with bos/eos_token the texts of the
// BOS/EOS ids. Every malformed or unsupported key is a tritium::Error naming the file and key.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "io/gguf.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tritium {

/// The tokenizer.json (Hugging Face layout) equivalent to the file's tokenizer metadata.
nlohmann::json gguf_tokenizer_json(const GgufFile& f);

/// The file's tokenizer.
std::unique_ptr<Tokenizer> gguf_tokenizer(const GgufFile& f);

/// The file's chat template ("default": tokenizer.chat_template; else tokenizer.chat_template.<name>). Throws when
/// the file has none.
ChatTemplateFiles gguf_chat_template(const GgufFile& f, const std::string& name = "default");

/// Writes the Hugging Face files that describe a GGUF model into `dir`: config.json, generation_config.json,
/// tokenizer.json, tokenizer_config.json (bos/eos tokens) and chat_template.jinja (when the file has a template).
/// Loading the folder's config and tokenizer gives what loading the GGUF file gives. Throws tritium::Error on I/O
/// failure or a configuration config.json cannot state (io/model_config.h model_config_to_json).
void write_gguf_side_files(const GgufFile& f, const std::string& dir);

}  // namespace tritium
