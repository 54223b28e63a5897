// tritium io: Hugging Face config.json / generation_config.json for the supported architectures.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tritium {

/// Supported decoder-only architectures (config.json "architectures"[0]).
enum class Arch { kLlama, kQwen2, kQwen3, kBitNet };
/// MLP activation (config.json "hidden_act"): silu -> SwiGLU, relu2 -> relu(gate)^2 * up.
enum class Activation { kSilu, kRelu2 };
/// How BitNet packed weights' weight_scale is applied (quantization_config.linear_class).
enum class BitNetScaleMode { kMultiply /* autobitlinear */, kDivide /* bitlinear */ };

struct ModelConfig {
  std::string model_dir;
  Arch arch = Arch::kLlama;
  std::string arch_name;  ///< e.g. "BitNetForCausalLM"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  int max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  ///< q/k/v projections have a bias (Qwen2; Llama with attention_bias)
  bool o_bias = false;    ///< o_proj has a bias (Llama with attention_bias)
  bool mlp_bias = false;
  /// Per-head RMSNorm of q and k (weights [head_dim], the model's rms_norm_eps) after the projections and before
  /// RoPE: Qwen3's q_norm / k_norm.
  bool qk_norm = false;
  Activation hidden_act = Activation::kSilu;
  bool sub_norms = false;  ///< BitNet attn_sub_norm + ffn_sub_norm
  // Quantization (quantization_config)
  bool bitnet_quant = false;  ///< quant_method == "bitnet": ternary projections, int8 activations
  BitNetScaleMode bitnet_scale_mode = BitNetScaleMode::kMultiply;
  // Special tokens
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;
  // generation_config.json defaults (absent: HF defaults)
  float gen_temperature = 1.0f;
  float gen_top_p = 1.0f;
  int gen_top_k = 0;
  float gen_repetition_penalty = 1.0f;
  bool gen_do_sample = false;

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
};

/// Reads <dir>/config.json (and generation_config.json if present).
/// Accepts rope_theta at top level or in rope_parameters / rope_scaling; bos/eos ids as int, list or null.
/// Throws tritium::Error naming the file and field: missing folder, malformed JSON, a required field missing or of
/// the wrong type, an unsupported architecture, hidden_act or quant_method, inconsistent head sizes, a
/// bos/eos_token_id outside [0, vocab_size) (pad_token_id is not used and not checked).
ModelConfig load_model_config(const std::string& dir);

/// Parses an already-read config.json object (dir is used in messages only).
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& dir);

std::string_view arch_name(Arch a);

/// A config.json that parse_model_config reads back as `c` (architecture, sizes, RoPE theta, biases, activation,
/// BitNet quantization, bos/eos ids). Throws tritium::Error for a configuration config.json cannot state (a Llama or
/// BitNet model with q/k/v biases but no o_proj bias or the reverse; a Qwen2 model without q/k/v biases or with an
/// o_proj bias).
nlohmann::json model_config_to_json(const ModelConfig& c);

}  // namespace tritium
