#include "model/gguf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "core/error.h"

namespace tritium {

bool is_gguf_path(const std::string& path) { return std::filesystem::is_regular_file(path); }

namespace {

enum class GgufArch { kBitNetB158, kBitNet25, kBitNet, kLlama, kQwen2, kQwen3 };

GgufArch parse_arch(const GgufFile& f, const std::string& name) {
  if (name == "bitnet-b1.58") return GgufArch::kBitNetB158;
  if (name == "bitnet-25") return GgufArch::kBitNet25;
  if (name == "bitnet") return GgufArch::kBitNet;
  if (name == "llama") return GgufArch::kLlama;
  if (name == "qwen2") return GgufArch::kQwen2;
  if (name == "qwen3") return GgufArch::kQwen3;
  fail("{}: general.architecture '{}' is not supported (supported: bitnet-b1.58, bitnet-25, bitnet, llama, qwen2, qwen3)",
       f.path(), name);
}

// A positive size key, at most 2^30 (a larger value is a corrupt file, not a model).
int size_key(const GgufFile& f, const std::string& key, std::optional<int> def = std::nullopt) {
  const GgufValue* v = f.find(key);
  if (!v) {
    if (def) return *def;
    fail("{}: metadata '{}' is missing", f.path(), key);
  }
  uint64_t x = 0;
  if (v->type() == GgufType::kArray) {
    // Per-layer values (llama.cpp allows them for head counts): tritium needs them all equal.
    const std::vector<int64_t> a = f.get_int_array(key);
    if (a.empty() || std::any_of(a.begin(), a.end(), [&](int64_t e) { return e != a[0]; }))
      fail("{}: metadata '{}' differs between layers; tritium needs one value for every layer", f.path(), key);
    x = a[0] < 0 ? 0 : static_cast<uint64_t>(a[0]);
  } else {
    x = f.get_uint(key);
  }
  if (x == 0 || x > (1u << 30)) fail("{}: metadata '{}' is {}, expected 1 to 2^30", f.path(), key, x);
  return static_cast<int>(x);
}

std::optional<int32_t> token_key(const GgufFile& f, const std::string& key, int vocab) {
  const auto id = f.find_uint(key);
  if (!id) return std::nullopt;
  if (*id >= static_cast<uint64_t>(vocab)) fail("{}: metadata '{}' is {}, outside the vocabulary [0, {})", f.path(), key, *id, vocab);
  return static_cast<int32_t>(*id);
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
  ModelConfig c;
  c.model_dir = f.path();
  const std::string a = f.get_string("general.architecture");
  const GgufArch arch = parse_arch(f, a);
  c.arch_name = a;
  c.arch = arch == GgufArch::kLlama   ? Arch::kLlama
           : arch == GgufArch::kQwen2 ? Arch::kQwen2
           : arch == GgufArch::kQwen3 ? Arch::kQwen3
                                      : Arch::kBitNet;
  c.qk_norm = arch == GgufArch::kQwen3;
  const std::string p = a + ".";
  c.num_layers = size_key(f, p + "block_count");
  c.hidden_size = size_key(f, p + "embedding_length");
  c.intermediate_size = size_key(f, p + "feed_forward_length");
  c.num_heads = size_key(f, p + "attention.head_count");
  c.num_kv_heads = size_key(f, p + "attention.head_count_kv", c.num_heads);
  if (f.find(p + "attention.key_length")) {
    c.head_dim = size_key(f, p + "attention.key_length");
    if (size_key(f, p + "attention.value_length", c.head_dim) != c.head_dim)
      fail("{}: attention.key_length {} differs from attention.value_length (not supported)", f.path(), c.head_dim);
  } else {
    if (c.hidden_size % c.num_heads != 0)
      fail("{}: {}embedding_length {} is not divisible by attention.head_count {}", f.path(), p, c.hidden_size,
           c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) fail("{}: head size {} must be even for RoPE", f.path(), c.head_dim);
  if (static_cast<int64_t>(c.num_heads) * c.head_dim > (int64_t{1} << 30))
    fail("{}: {} heads of size {} are more than 2^30 values", f.path(), c.num_heads, c.head_dim);
  // Every block has tensors, so a block count the tensor directory cannot back is a corrupt key (and would size
  // the layer table before any tensor is read).
  if (!f.find_tensor(fmt::format("blk.{}.attn_norm.weight", c.num_layers - 1)))
    fail("{}: {}block_count is {}, but tensor 'blk.{}.attn_norm.weight' is missing", f.path(), p, c.num_layers,
         c.num_layers - 1);
  if (c.num_heads % c.num_kv_heads != 0)
    fail("{}: attention.head_count {} is not a multiple of attention.head_count_kv {}", f.path(), c.num_heads,
         c.num_kv_heads);
  if (auto rd = f.find_uint(p + "rope.dimension_count"); rd && *rd != static_cast<uint64_t>(c.head_dim))
    fail("{}: {}rope.dimension_count {} is not the head size {} (partial RoPE is not supported)", f.path(), p, *rd,
         c.head_dim);
  const double eps = f.get_float(p + "attention.layer_norm_rms_epsilon");
  if (!(eps > 0 && eps < 1)) fail("{}: {}attention.layer_norm_rms_epsilon is {}, expected in (0, 1)", f.path(), p, eps);
  c.rms_norm_eps = static_cast<float>(eps);
  c.rope_theta = f.find_float(p + "rope.freq_base").value_or(10000.0);
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    fail("{}: {}rope.freq_base is {}, expected a positive number", f.path(), p, c.rope_theta);
  const std::string scaling = f.find_string(p + "rope.scaling.type").value_or("none");
  const double factor = f.find_float(p + "rope.scaling.factor").value_or(1.0);
  if (!(scaling == "none" || (scaling == "linear" && (factor == 1.0 || factor == 0.0))))
    fail("{}: RoPE scaling '{}' with factor {} is not supported (only none, or linear with factor 1)", f.path(), scaling,
         factor);
  c.max_position_embeddings = size_key(f, p + "context_length", 2048);

  const GgufTensorInfo& embd = f.tensor("token_embd.weight");
  if (embd.ne.size() != 2 || embd.ne[0] != c.hidden_size)
    fail("{}: tensor 'token_embd.weight' has ne {}, expected [{}, vocab]", f.path(), embd.ne_str(), c.hidden_size);
  if (embd.ne[1] <= 0 || embd.ne[1] > (int64_t{1} << 30))
    fail("{}: tensor 'token_embd.weight' has {} rows", f.path(), embd.ne[1]);
  c.vocab_size = static_cast<int>(embd.ne[1]);
  if (auto v = f.find_uint(p + "vocab_size"); v && *v != static_cast<uint64_t>(c.vocab_size))
    fail("{}: {}vocab_size {} differs from the {} rows of token_embd.weight", f.path(), p, *v, c.vocab_size);
  if (const GgufValue* toks = f.find("tokenizer.ggml.tokens"); toks && toks->size() > static_cast<uint64_t>(c.vocab_size))
    fail("{}: tokenizer.ggml.tokens has {} tokens, more than the {} rows of token_embd.weight", f.path(), toks->size(),
         c.vocab_size);

  if (f.find_tensor("rope_freqs.weight"))
    fail("{}: tensor 'rope_freqs.weight' (RoPE frequency factors, as Llama 3.1's scaling) is not supported", f.path());
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  c.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.o_bias = f.find_tensor("blk.0.attn_output.bias") != nullptr;
  c.mlp_bias = f.find_tensor("blk.0.ffn_up.bias") != nullptr;
  const bool relu2_models = arch == GgufArch::kBitNetB158 || arch == GgufArch::kBitNet25;
  const std::string act = f.find_string(p + "hidden_activation").value_or(relu2_models ? "relu2" : "silu");
  if (act == "relu2") c.hidden_act = Activation::kRelu2;
  else if (act == "silu" || act == "swish") c.hidden_act = Activation::kSilu;
  else fail("{}: {}hidden_activation '{}' is not supported (supported: relu2, silu)", f.path(), p, act);
  c.sub_norms = c.arch == Arch::kBitNet;
  c.bitnet_quant = c.arch == Arch::kBitNet;
  c.bitnet_scale_mode = BitNetScaleMode::kMultiply;  // GGUF holds the effective weights: W = ternary x scale

  c.bos_token_id = token_key(f, "tokenizer.ggml.bos_token_id", c.vocab_size);
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const auto id = token_key(f, k, c.vocab_size);
    if (id && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), *id) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(*id);
  }
  return c;
}

}  // namespace tritium
