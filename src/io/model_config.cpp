#include "io/model_config.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"

namespace fs = std::filesystem;

namespace tritium {

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::kLlama: return "llama";
    case Arch::kQwen2: return "qwen2";
    case Arch::kQwen3: return "qwen3";
    case Arch::kBitNet: return "bitnet";
  }
  return "?";
}

namespace {

nlohmann::json parse_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", path, e.what());
  }
}

int get_int(const nlohmann::json& j, const char* key, const std::string& file) {
  if (!j.contains(key)) fail("{}: required field '{}' is missing", file, key);
  const auto& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (1 << 30))
    fail("{}: field '{}' must be a positive integer, got {}", file, key, v.dump());
  return v.get<int>();
}

// An optional boolean field: `def` when absent or null, else it must be true/false.
bool get_bool(const nlohmann::json& j, const char* key, bool def, const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_boolean()) fail("{}: field '{}' must be true or false, got {}", file, key, j[key].dump());
  return j[key].get<bool>();
}

// An optional string field: `def` when absent or null, else it must be a string.
std::string get_string(const nlohmann::json& j, const char* key, const std::string& def, const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_string()) fail("{}: field '{}' must be a string, got {}", file, key, j[key].dump());
  return j[key].get<std::string>();
}

// A token id field (bos/eos_token_id): null (HF's "none") gives an empty list, else an integer or a list of
// integers, each in [0, vocab_size): an id outside the vocabulary would index past the embedding and logits rows.
std::vector<int32_t> token_ids(const nlohmann::json& v, const char* key, int vocab_size, const std::string& file) {
  std::vector<int32_t> out;
  if (v.is_null()) return out;
  if (!v.is_number_integer() && !v.is_array())
    fail("{}: field '{}' must be an integer or a list of integers, got {}", file, key, v.dump());
  for (const auto& e : v.is_array() ? v : nlohmann::json::array({v})) {
    if (!e.is_number_integer()) fail("{}: field '{}' must hold integers, got {}", file, key, v.dump());
    // Compare as wide integers: a get<int32_t>() first would wrap 2^32 to 0.
    const bool neg = !e.is_number_unsigned() && e.get<int64_t>() < 0;
    if (neg || e.get<uint64_t>() >= static_cast<uint64_t>(vocab_size))
      fail("{}: {} {} is outside the vocabulary [0, {})", file, key, e.dump(), vocab_size);
    out.push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  return out;
}

}  // namespace

ModelConfig parse_model_config(const nlohmann::json& j, const std::string& dir) {
  const std::string file = (fs::path(dir) / "config.json").string();
  if (!j.is_object()) fail("{}: not a JSON object", file);
  ModelConfig c;
  c.model_dir = dir;
  std::string arch;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    arch = j["architectures"][0].get<std::string>();
  } else if (j.contains("model_type") && j["model_type"].is_string()) {
    arch = j["model_type"].get<std::string>();
  } else {
    fail("{}: required field 'architectures' is missing", file);
  }
  c.arch_name = arch;
  if (arch == "LlamaForCausalLM" || arch == "llama" || arch == "MistralForCausalLM") c.arch = Arch::kLlama;
  else if (arch == "Qwen2ForCausalLM" || arch == "qwen2") c.arch = Arch::kQwen2;
  else if (arch == "Qwen3ForCausalLM" || arch == "qwen3") c.arch = Arch::kQwen3;
  else if (arch == "BitNetForCausalLM" || arch == "bitnet") c.arch = Arch::kBitNet;
  else fail("{}: unsupported architecture '{}' (supported: BitNetForCausalLM, LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)",
            file, arch);

  c.vocab_size = get_int(j, "vocab_size", file);
  c.hidden_size = get_int(j, "hidden_size", file);
  c.intermediate_size = get_int(j, "intermediate_size", file);
  c.num_layers = get_int(j, "num_hidden_layers", file);
  c.num_heads = get_int(j, "num_attention_heads", file);
  c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                       ? get_int(j, "num_key_value_heads", file)
                       : c.num_heads;
  if (j.contains("head_dim") && !j["head_dim"].is_null()) c.head_dim = get_int(j, "head_dim", file);
  else {
    if (c.hidden_size % c.num_heads != 0)
      fail("{}: hidden_size {} is not divisible by num_attention_heads {}", file, c.hidden_size, c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) fail("{}: head_dim {} must be even for RoPE", file, c.head_dim);
  if (c.num_heads % c.num_kv_heads != 0)
    fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", file, c.num_heads,
         c.num_kv_heads);
  if (j.contains("rms_norm_eps")) {
    if (!j["rms_norm_eps"].is_number()) fail("{}: field 'rms_norm_eps' must be a number", file);
    c.rms_norm_eps = j["rms_norm_eps"].get<float>();
  }
  // rope_theta: top level (transformers < 5), rope_parameters (transformers 5), rope_scaling (some checkpoints).
  bool have_theta = false;
  for (const char* k : {"rope_parameters", "rope_scaling"}) {
    if (j.contains(k) && j[k].is_object()) {
      const auto& rp = j[k];
      if (rp.contains("rope_theta") && rp["rope_theta"].is_number()) {
        c.rope_theta = rp["rope_theta"].get<double>();
        have_theta = true;
      }
      // "type" is the key older transformers versions wrote (linear, dynamic, yarn, ...).
      for (const char* tk : {"rope_type", "type"}) {
        if (rp.contains(tk) && rp[tk].is_string() && rp[tk] != "default")
          fail("{}: {}.{} '{}' is not supported (only 'default')", file, k, tk, rp[tk].get<std::string>());
      }
    }
  }
  if (j.contains("rope_theta") && j["rope_theta"].is_number()) {
    c.rope_theta = j["rope_theta"].get<double>();
    have_theta = true;
  }
  (void)have_theta;  // HF default 10000 applies when absent
  if (j.contains("max_position_embeddings") && !j["max_position_embeddings"].is_null())
    c.max_position_embeddings = get_int(j, "max_position_embeddings", file);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", c.tie_word_embeddings, file);
  const bool attention_bias = get_bool(j, "attention_bias", false, file);
  c.qkv_bias = c.arch == Arch::kQwen2 || attention_bias;
  c.o_bias = c.arch != Arch::kQwen2 && attention_bias;
  c.mlp_bias = get_bool(j, "mlp_bias", false, file);
  c.qk_norm = c.arch == Arch::kQwen3;
  const std::string act = get_string(j, "hidden_act", c.arch == Arch::kBitNet ? "relu2" : "silu", file);
  if (act == "silu" || act == "swish") c.hidden_act = Activation::kSilu;
  else if (act == "relu2") c.hidden_act = Activation::kRelu2;
  else fail("{}: unsupported hidden_act '{}' (supported: silu, relu2)", file, act);
  c.sub_norms = c.arch == Arch::kBitNet;

  if (j.contains("quantization_config") && !j["quantization_config"].is_null()) {
    const auto& q = j["quantization_config"];
    if (!q.is_object()) fail("{}: field 'quantization_config' must be an object, got {}", file, q.dump());
    const std::string method = get_string(q, "quant_method", "", file);
    if (method == "bitnet") {
      c.bitnet_quant = true;
      // transformers' BitNetQuantConfig defaults: linear_class "bitlinear" (weight_scale divides),
      // quantization_mode "offline", use_rms_norm false. Falcon3-1.58bit configs state only quant_method.
      const std::string lc = get_string(q, "linear_class", "bitlinear", file);
      if (lc == "autobitlinear") c.bitnet_scale_mode = BitNetScaleMode::kMultiply;
      else if (lc == "bitlinear") c.bitnet_scale_mode = BitNetScaleMode::kDivide;
      else fail("{}: unsupported quantization_config.linear_class '{}' (supported: bitlinear, autobitlinear)", file, lc);
      const std::string mode = get_string(q, "quantization_mode", "offline", file);
      if (mode != "offline" && mode != "online")
        fail("{}: unsupported quantization_config.quantization_mode '{}' (supported: offline, online)", file, mode);
      if (get_bool(q, "use_rms_norm", false, file))
        fail("{}: quantization_config.use_rms_norm true (an RMSNorm inside every BitLinear) is not supported", file);
      if (c.arch == Arch::kQwen2 || c.qkv_bias || c.o_bias || c.mlp_bias)
        fail("{}: quantization_config.quant_method 'bitnet' on {} with linear biases is not supported (supported: "
             "BitNetForCausalLM, LlamaForCausalLM and Qwen3ForCausalLM without biases)", file, arch);
    } else {
      fail("{}: unsupported quantization_config.quant_method '{}' (supported: bitnet)", file, method);
    }
  }
  if (c.arch == Arch::kBitNet) c.bitnet_quant = true;

  if (j.contains("bos_token_id")) {
    auto ids = token_ids(j["bos_token_id"], "bos_token_id", c.vocab_size, file);
    if (!ids.empty()) c.bos_token_id = ids[0];
  }
  if (j.contains("eos_token_id")) c.eos_token_ids = token_ids(j["eos_token_id"], "eos_token_id", c.vocab_size, file);
  // pad_token_id is not used, and real checkpoints carry values such as -1 for "none": not checked.
  return c;
}

nlohmann::json model_config_to_json(const ModelConfig& c) {
  const bool qwen2 = c.arch == Arch::kQwen2;
  if (qwen2 ? (!c.qkv_bias || c.o_bias) : c.qkv_bias != c.o_bias)
    fail("{}: config.json cannot state this model's biases (q/k/v {}, o_proj {})", c.model_dir, c.qkv_bias, c.o_bias);
  nlohmann::json j;
  j["architectures"] = {c.arch == Arch::kBitNet ? "BitNetForCausalLM"
                        : qwen2                 ? "Qwen2ForCausalLM"
                        : c.arch == Arch::kQwen3 ? "Qwen3ForCausalLM"
                                                 : "LlamaForCausalLM"};
  j["model_type"] = std::string(arch_name(c.arch));
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (!qwen2) j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["hidden_act"] = c.hidden_act == Activation::kRelu2 ? "relu2" : "silu";
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids;
  if (c.bitnet_quant)
    j["quantization_config"] = {{"quant_method", "bitnet"},
                                {"linear_class", c.bitnet_scale_mode == BitNetScaleMode::kMultiply ? "autobitlinear" : "bitlinear"}};
  return j;
}

ModelConfig load_model_config(const std::string& dir) {
  if (!fs::is_directory(dir)) fail("{}: model folder not found", dir);
  const std::string file = (fs::path(dir) / "config.json").string();
  if (!fs::exists(file)) fail("{}: not found (a Hugging Face model folder needs config.json)", file);
  ModelConfig c = parse_model_config(parse_json_file(file), dir);
  const std::string gen = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(gen)) {
    nlohmann::json g = parse_json_file(gen);
    if (g.contains("eos_token_id")) {
      for (int32_t id : token_ids(g["eos_token_id"], "eos_token_id", c.vocab_size, gen)) {
        if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
          c.eos_token_ids.push_back(id);
      }
    }
    if (g.contains("bos_token_id") && !c.bos_token_id) {
      auto ids = token_ids(g["bos_token_id"], "bos_token_id", c.vocab_size, gen);
      if (!ids.empty()) c.bos_token_id = ids[0];
    }
    if (g.contains("temperature") && g["temperature"].is_number()) c.gen_temperature = g["temperature"].get<float>();
    if (g.contains("top_p") && g["top_p"].is_number()) c.gen_top_p = g["top_p"].get<float>();
    if (g.contains("top_k") && g["top_k"].is_number_integer()) c.gen_top_k = g["top_k"].get<int>();
    if (g.contains("repetition_penalty") && g["repetition_penalty"].is_number())
      c.gen_repetition_penalty = g["repetition_penalty"].get<float>();
    if (g.contains("do_sample") && g["do_sample"].is_boolean()) c.gen_do_sample = g["do_sample"].get<bool>();
  }
  return c;
}

}  // namespace tritium
