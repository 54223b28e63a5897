// Ternary Bonsai-shaped Qwen3 GGUF files for benchmarks (model/synth.h).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <tuple>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "formats/gguf_quants.h"
#include "io/gguf_writer.h"
#include "model/synth.h"
#include "formats/ternary_format.h"

namespace tritium {
namespace {

struct Qwen3Shape {
  const char* name;
  int vocab, hidden, intermediate, layers, heads, kv_heads, head_dim;
  bool tied;
};
// Qwen/Qwen3-1.7B and Qwen/Qwen3-8B config.json sizes (Ternary Bonsai 1.7B / 8B share them); qwen3-micro is a few KiB.
constexpr Qwen3Shape kQwen3Shapes[] = {
    {"qwen3-1.7b", 151936, 2048, 6144, 28, 16, 8, 128, true},
    {"qwen3-8b", 151936, 4096, 12288, 36, 32, 8, 128, false},
    {"qwen3-micro", 0, 128, 256, 2, 4, 2, 32, false},  // vocab: the tokenizer's
};

// One ternary matrix [rows, cols]: values in {-1, 0, 1} (P(0) = z) and an fp16 scale per row and group of 128,
// `base` times a factor in [0.75, 1.25). Generated a block of rows at a time from a seed of its own, so the Q2_0 and
// the F16 file hold the same numbers and neither needs the whole matrix in memory.
struct TernaryMatrix {
  int64_t rows, cols;
  double base, z;
  uint64_t seed;

  // Rows [r0, r0 + n): values and fp16 scales.
  void generate(int64_t r0, int64_t n, std::vector<int8_t>& q, std::vector<uint16_t>& d) const {
    const int64_t G = cols / kTernaryGroupK;
    q.resize(static_cast<size_t>(n * cols));
    d.resize(static_cast<size_t>(n * G));
    const uint64_t zero_thr = static_cast<uint64_t>(z * 65536.0);
    for (int64_t r = 0; r < n; ++r) {
      SplitMix64 rng{seed * 0x100000001b3ull + static_cast<uint64_t>(r0 + r)};
      for (int64_t g = 0; g < G; ++g)
        d[static_cast<size_t>(r * G + g)] = f32_to_f16(static_cast<float>(base * (0.75 + 0.5 * rng.uniform())));
      for (int64_t c = 0; c < cols; c += 4) {
        const uint64_t bits = rng.next();
        for (int j = 0; j < 4; ++j) {
          const uint64_t u = (bits >> (16 * j)) & 0xffff;
          q[static_cast<size_t>(r * cols + c + j)] = static_cast<int8_t>(u < zero_thr ? 0 : ((u & 1) ? 1 : -1));
        }
      }
    }
  }
};

constexpr int64_t kRowsPerChunk = 256;

void add_matrix(GgufFileWriter& w, const std::string& name, const TernaryMatrix& m, const SynthOptions& o) {
  const std::vector<int64_t> ne = {m.cols, m.rows};
  if (o.gguf_type == "f16") {
    w.add_tensor(name, static_cast<uint32_t>(GgmlType::kF16), ne, static_cast<uint64_t>(m.rows * m.cols) * 2,
                 [m](uint8_t* dst) {
                   std::vector<int8_t> q;
                   std::vector<uint16_t> d;
                   for (int64_t r0 = 0; r0 < m.rows; r0 += kRowsPerChunk) {
                     const int64_t n = std::min(kRowsPerChunk, m.rows - r0);
                     m.generate(r0, n, q, d);
                     auto* out = reinterpret_cast<uint16_t*>(dst) + r0 * m.cols;
                     for (int64_t i = 0; i < n * m.cols; ++i) {
                       const uint16_t s = d[static_cast<size_t>(i / kTernaryGroupK)];
                       // +-d and 0 are exact in fp16.
                       out[i] = q[static_cast<size_t>(i)] == 0 ? 0 : q[static_cast<size_t>(i)] > 0 ? s : static_cast<uint16_t>(s | 0x8000);
                     }
                   }
                 });
    return;
  }
  const int64_t block = o.q2_block, bb = 2 + block / 4;
  w.add_tensor(name, static_cast<uint32_t>(GgmlType::kQ2_0), ne, static_cast<uint64_t>(m.rows * m.cols / block * bb),
               [m, block, bb](uint8_t* dst) {
                 std::vector<int8_t> q;
                 std::vector<uint16_t> d, db;
                 const int64_t per = kTernaryGroupK / block;  // blocks per group of 128
                 for (int64_t r0 = 0; r0 < m.rows; r0 += kRowsPerChunk) {
                   const int64_t n = std::min(kRowsPerChunk, m.rows - r0);
                   m.generate(r0, n, q, d);
                   db.resize(d.size() * static_cast<size_t>(per));
                   for (size_t i = 0; i < db.size(); ++i) db[i] = d[i / static_cast<size_t>(per)];
                   encode_q2_0(q.data(), db.data(), n * m.cols, block, dst + r0 * m.cols / block * bb);
                 }
               });
}

void add_ones(GgufFileWriter& w, const std::string& name, int64_t n) {
  w.add_tensor(name, static_cast<uint32_t>(GgmlType::kF32), {n}, static_cast<uint64_t>(n) * 4, [n](uint8_t* dst) {
    const float one = 1.0f;
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + 4 * i, &one, 4);
  });
}

// tokenizer.ggml.* from a Hugging Face byte-level BPE tokenizer.json, as llama.cpp's convert_hf_to_gguf writes
// them: ids without a token become "[PAD<id>]" (type 5, unused), added tokens are control (3) when special, else
// user-defined (4). Returns the vocabulary size the tokenizer needs.
int add_tokenizer(GgufFileWriter& w, const std::string& dir, int vocab) {
  const std::string path = dir + "/tokenizer.json";
  std::ifstream in(path);
  if (!in) fail("synth: {}: not found (pass --tokenizer DIR with the Qwen3 tokenizer)", path);
  const nlohmann::json t = nlohmann::json::parse(in, nullptr, false);
  if (t.is_discarded() || !t.contains("model") || t["model"].value("type", "") != "BPE")
    fail("synth: {}: not a BPE tokenizer.json", path);
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto put = [&](int64_t id, const std::string& s, int32_t type) {
    if (id < 0 || id > (1 << 24)) fail("synth: {}: token id {} out of range", path, id);
    if (static_cast<size_t>(id) >= tokens.size()) {
      tokens.resize(static_cast<size_t>(id) + 1);
      types.resize(static_cast<size_t>(id) + 1, 0);
    }
    tokens[static_cast<size_t>(id)] = s;
    types[static_cast<size_t>(id)] = type;
  };
  for (const auto& [s, id] : t["model"]["vocab"].items()) put(id.get<int64_t>(), s, 1);
  for (const auto& a : t.value("added_tokens", nlohmann::json::array()))
    put(a["id"].get<int64_t>(), a["content"].get<std::string>(), a.value("special", false) ? 3 : 4);
  const int n = std::max<int>(vocab, static_cast<int>(tokens.size()));
  tokens.resize(static_cast<size_t>(n));
  types.resize(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i)
    if (types[static_cast<size_t>(i)] == 0) {
      tokens[static_cast<size_t>(i)] = fmt::format("[PAD{}]", i);
      types[static_cast<size_t>(i)] = 5;
    }
  std::vector<std::string> merges;
  for (const auto& m : t["model"]["merges"])
    merges.push_back(m.is_array() ? m[0].get<std::string>() + " " + m[1].get<std::string>() : m.get<std::string>());
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "qwen2");
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_strings("tokenizer.ggml.merges", merges);
  auto id_of = [&](const std::string& s) -> int {
    for (int i = 0; i < n; ++i)
      if (tokens[static_cast<size_t>(i)] == s) return i;
    return -1;
  };
  if (int e = id_of("<|im_end|>"); e >= 0) w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(e));
  if (int p = id_of("<|endoftext|>"); p >= 0) {
    w.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(p));
    w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(p));
  }
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  std::ifstream cfg(dir + "/tokenizer_config.json");
  if (cfg) {
    const nlohmann::json c = nlohmann::json::parse(cfg, nullptr, false);
    if (!c.is_discarded() && c.contains("chat_template") && c["chat_template"].is_string())
      w.add_string("tokenizer.chat_template", c["chat_template"].get<std::string>());
  }
  return n;
}

}  // namespace

bool synth_shape_is_gguf(const std::string& shape) {
  for (const auto& s : kQwen3Shapes)
    if (shape == s.name) return true;
  return false;
}

void write_synthetic_qwen3_gguf(const std::string& out_path, const SynthOptions& o) {
  const Qwen3Shape* sh = nullptr;
  for (const auto& s : kQwen3Shapes)
    if (o.shape == s.name) sh = &s;
  if (!sh) fail("synth: '{}' is not a GGUF shape (qwen3-1.7b, qwen3-8b, qwen3-micro)", o.shape);
  if (!(o.zero_density >= 0.0 && o.zero_density <= 1.0))
    fail("synth: --zero-density {} must be in [0, 1]", o.zero_density);
  if (o.gguf_type != "q2_0" && o.gguf_type != "f16") fail("synth: --type '{}' (expected q2_0 or f16)", o.gguf_type);
  if (o.q2_block != 64 && o.q2_block != 128) fail("synth: --q2-block {} (expected 64 or 128)", o.q2_block);
  if (o.tokenizer_dir.empty()) fail("synth: --shape {} needs --tokenizer DIR (the Qwen3 tokenizer.json)", o.shape);
  const int layers = o.num_layers > 0 ? o.num_layers : sh->layers;
  const int64_t I = o.intermediate_size > 0 ? o.intermediate_size : sh->intermediate;
  if (I % kTernaryGroupK != 0) fail("synth: intermediate size {} must be a multiple of 128", I);

  GgufFileWriter w;
  w.add_string("general.architecture", "qwen3");
  w.add_string("general.name", fmt::format("tritium synthetic {} ({} ternary, zero density {}, seed {})", o.shape,
                                           o.gguf_type, o.zero_density, o.seed));
  w.add_u32("general.quantization_version", 2);
  if (o.gguf_type == "f16") w.add_u32("general.file_type", 1);  // MOSTLY_F16
  const int vocab = add_tokenizer(w, o.tokenizer_dir, sh->vocab);  // (metadata order is free)
  const int64_t H = sh->hidden, hd = sh->head_dim, qd = sh->heads * hd, kvd = sh->kv_heads * hd, V = vocab;
  w.add_u32("qwen3.block_count", static_cast<uint32_t>(layers));
  w.add_u32("qwen3.context_length", 40960);
  w.add_u32("qwen3.embedding_length", static_cast<uint32_t>(H));
  w.add_u32("qwen3.feed_forward_length", static_cast<uint32_t>(I));
  w.add_u32("qwen3.attention.head_count", static_cast<uint32_t>(sh->heads));
  w.add_u32("qwen3.attention.head_count_kv", static_cast<uint32_t>(sh->kv_heads));
  w.add_u32("qwen3.attention.key_length", static_cast<uint32_t>(hd));
  w.add_u32("qwen3.attention.value_length", static_cast<uint32_t>(hd));
  w.add_f32("qwen3.rope.freq_base", 1000000.0f);
  w.add_f32("qwen3.attention.layer_norm_rms_epsilon", 1e-6f);

  uint64_t next_seed = o.seed * 1000003ull;
  auto mat = [&](int64_t rows, int64_t cols, double base) {
    return TernaryMatrix{rows, cols, base, o.zero_density, ++next_seed};
  };
  add_matrix(w, "token_embd.weight", mat(V, H, 0.02), o);
  add_ones(w, "output_norm.weight", H);
  if (!sh->tied) add_matrix(w, "output.weight", mat(V, H, 1.0 / std::sqrt(static_cast<double>(H))), o);
  for (int l = 0; l < layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    add_ones(w, p + "attn_norm.weight", H);
    add_ones(w, p + "ffn_norm.weight", H);
    add_ones(w, p + "attn_q_norm.weight", hd);
    add_ones(w, p + "attn_k_norm.weight", hd);
    const std::vector<std::tuple<const char*, int64_t, int64_t>> projs = {
        {"attn_q", qd, H}, {"attn_k", kvd, H}, {"attn_v", kvd, H}, {"attn_output", H, qd},
        {"ffn_gate", I, H}, {"ffn_up", I, H}, {"ffn_down", H, I}};
    for (const auto& [name, out, in] : projs)
      add_matrix(w, p + name + ".weight", mat(out, in, 1.0 / std::sqrt(static_cast<double>(in))), o);
  }
  w.write(out_path);
}

}  // namespace tritium
