#include "model/synth.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;

namespace tritium {

namespace {

// Packed BitNet weight [out/4, in]: byte [r, c] holds rows r + j*out/4 (j = 0..3) in bits 2j..2j+1, code = w + 1.
std::vector<uint8_t> random_packed(SplitMix64& rng, int64_t out, int64_t in, double z) {
  std::vector<uint8_t> p(static_cast<size_t>(out / 4 * in));
  const uint64_t zero_thr = static_cast<uint64_t>(z * 4294967296.0);
  for (auto& b : p) {
    uint8_t v = 0;
    uint64_t r = rng.next();
    for (int j = 0; j < 4; ++j) {
      const uint64_t u = (r >> (16 * j)) & 0xffff;  // 16 random bits per weight
      // zero with probability z (16-bit resolution), else +-1 with equal probability
      const bool zero = (u << 16) < zero_thr;
      const int code = zero ? 1 : ((u & 1) ? 2 : 0);
      v |= static_cast<uint8_t>(code << (2 * j));
    }
    b = v;
  }
  return p;
}

}  // namespace

ModelConfig synth_shape(const std::string& name) {
  ModelConfig c;
  c.arch = Arch::kBitNet;
  c.arch_name = "BitNetForCausalLM";
  c.hidden_act = Activation::kRelu2;
  c.rms_norm_eps = 1e-5f;
  c.tie_word_embeddings = true;
  struct Shape {
    const char* name;
    int vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, max_pos, bos;
    std::vector<int> eos;
  };
  static const Shape kShapes[] = {
      {"bitnet-2b4t", 128256, 2560, 6912, 30, 20, 5, 128, 4096, 128000, {128001, 128009}},
      {"qwen2-1.5b", 151936, 1536, 8960, 28, 12, 2, 128, 32768, 151643, {151643, 151645}},  // Qwen/Qwen2-1.5B sizes
      {"tiny", 8192, 256, 768, 8, 4, 2, 64, 1024, 0, {1}},
      {"micro", 256, 64, 128, 1, 4, 2, 16, 256, 0, {1}},  // a few KiB: fuzzing seeds
  };
  const Shape* sh = nullptr;
  for (const Shape& x : kShapes)
    if (name == x.name) sh = &x;
  if (!sh) fail("synth: unknown shape '{}' (known: bitnet-2b4t, qwen2-1.5b, tiny, micro)", name);
  c.vocab_size = sh->vocab;
  c.hidden_size = sh->hidden;
  c.intermediate_size = sh->intermediate;
  c.num_layers = sh->layers;
  c.num_heads = sh->heads;
  c.num_kv_heads = sh->kv_heads;
  c.head_dim = sh->head_dim;
  c.rope_theta = 500000.0;
  c.max_position_embeddings = sh->max_pos;
  c.bos_token_id = sh->bos;
  c.eos_token_ids = sh->eos;
  return c;
}

void write_synthetic_bitnet(const std::string& out_dir, const SynthOptions& o) {
  if (!(o.zero_density >= 0.0 && o.zero_density <= 1.0))
    fail("synth: --zero-density {} must be in [0, 1]", o.zero_density);
  if (o.num_layers < 0) fail("synth: --layers {} must be positive", o.num_layers);
  ModelConfig c = synth_shape(o.shape);
  if (o.num_layers > 0) c.num_layers = o.num_layers;
  if (o.intermediate_size < 0 || o.intermediate_size % 4)
    fail("synth: intermediate size {} must be a positive multiple of 4 (packed 4 rows per byte)", o.intermediate_size);
  if (o.intermediate_size > 0) c.intermediate_size = o.intermediate_size;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail("{}: cannot create folder: {}", out_dir, ec.message());

  nlohmann::ordered_json cfg = {
      {"architectures", {"BitNetForCausalLM"}},
      {"model_type", "bitnet"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"hidden_act", "relu2"},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"tie_word_embeddings", true},
      {"attention_bias", false},
      {"bos_token_id", *c.bos_token_id},
      {"eos_token_id", c.eos_token_ids},
      {"torch_dtype", "bfloat16"},
      {"quantization_config", {{"quant_method", "bitnet"}, {"linear_class", "autobitlinear"},
                               {"quantization_mode", "offline"}}},
      {"tritium_synthetic", {{"shape", o.shape}, {"zero_density", o.zero_density}, {"seed", o.seed}}}};
  std::ofstream(fs::path(out_dir) / "config.json") << cfg.dump(2) << "\n";
  nlohmann::ordered_json gen = {{"bos_token_id", *c.bos_token_id}, {"eos_token_id", c.eos_token_ids}, {"do_sample", false}};
  std::ofstream(fs::path(out_dir) / "generation_config.json") << gen.dump(2) << "\n";

  SplitMix64 rng{o.seed};
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, qd = c.q_dim(), kvd = c.kv_dim();
  std::vector<std::vector<uint8_t>> store;  // keeps every buffer alive until written
  std::vector<TensorToWrite> tensors;
  auto add = [&](std::string name, DType dt, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    store.push_back(std::move(bytes));
    tensors.push_back({std::move(name), dt, std::move(shape), store.back().data(), store.back().size()});
  };
  auto bf16_bytes = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = f32_to_bf16(v[i]);
      b[2 * i] = static_cast<uint8_t>(h);
      b[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    return b;
  };
  store.reserve(16 + static_cast<size_t>(c.num_layers) * 20);
  {
    std::vector<uint8_t> emb(static_cast<size_t>(V * H * 2));
    const double a = 0.02 * std::sqrt(3.0);  // uniform [-a, a] has std 0.02
    for (size_t i = 0; i < emb.size() / 2; ++i) {
      const uint16_t h = f32_to_bf16(static_cast<float>((rng.uniform() * 2 - 1) * a));
      emb[2 * i] = static_cast<uint8_t>(h);
      emb[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    add("model.embed_tokens.weight", DType::BF16, {V, H}, std::move(emb));
  }
  add("model.norm.weight", DType::BF16, {H}, bf16_bytes(std::vector<float>(H, 1.0f)));
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    add(p + "input_layernorm.weight", DType::BF16, {H}, bf16_bytes(std::vector<float>(H, 1.0f)));
    add(p + "post_attention_layernorm.weight", DType::BF16, {H}, bf16_bytes(std::vector<float>(H, 1.0f)));
    add(p + "self_attn.attn_sub_norm.weight", DType::BF16, {qd}, bf16_bytes(std::vector<float>(qd, 1.0f)));
    add(p + "mlp.ffn_sub_norm.weight", DType::BF16, {I}, bf16_bytes(std::vector<float>(I, 1.0f)));
    const std::vector<std::tuple<std::string, int64_t, int64_t>> projs = {
        {"self_attn.q_proj", qd, H}, {"self_attn.k_proj", kvd, H}, {"self_attn.v_proj", kvd, H},
        {"self_attn.o_proj", H, qd}, {"mlp.gate_proj", I, H},      {"mlp.up_proj", I, H},
        {"mlp.down_proj", H, I}};
    for (const auto& [name, out, in] : projs) {
      add(p + name + ".weight", DType::U8, {out / 4, in}, random_packed(rng, out, in, o.zero_density));
      // A plausible per-tensor scale (absmean of a N(0, 1/in)-initialised weight).
      add(p + name + ".weight_scale", DType::BF16, {1},
          bf16_bytes({static_cast<float>(std::sqrt(2.0 / 3.14159265358979) / std::sqrt(static_cast<double>(in)))}));
    }
  }
  write_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  if (!o.tokenizer_dir.empty()) {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
      const fs::path src = fs::path(o.tokenizer_dir) / f;
      if (!fs::exists(src)) {
        if (std::string(f) == "tokenizer.json") fail("{}: not found", src.string());
        continue;
      }
      fs::copy_file(src, fs::path(out_dir) / f, fs::copy_options::overwrite_existing, ec);
      if (ec) fail("{}: cannot copy to {}: {}", src.string(), out_dir, ec.message());
    }
  }
}

}  // namespace tritium
