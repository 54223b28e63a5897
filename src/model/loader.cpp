#include "model/loader.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/build_transformer.h"
#include "model/gguf_config.h"
#include "model/source_gguf.h"
#include "model/source_safetensors.h"
#include "model/tritium_model.h"

namespace tritium {

const std::vector<std::string>& quant_method_names() {
  static const std::vector<std::string> k = {"int8-absmax",      "int8-zeropoint",  "int8-rowwise",
                                             "int8-vectorwise",  "llm-int8",        "int8-weight-only",
                                             "ternary-absmean",  "ternary-absmean-g128", "ternary-threshold"};
  return k;
}

namespace {

// Loading frees float32 copies and unpacked codes as it packs; glibc keeps freed heap memory resident until told.
std::unique_ptr<Transformer> return_freed_memory(std::unique_ptr<Transformer> m) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  return m;
}

// A GGUF file: every weight is repacked or converted, except Q2_0 tables, which read the mapped file.
std::unique_ptr<Transformer> load_gguf(const std::string& path, const LoadOptions& opts) {
  auto file = std::make_shared<GgufFile>(GgufFile::open(path));
  const GgufFile& f = *file;
  ModelConfig c = gguf_model_config(f);
  const auto source = GgufSource::open(f, c);
  const std::string arch = c.arch_name;
  auto model = build_transformer(std::move(c), *source, opts);
  model->set_keep_alive(file);  // Q2_0 tables (Embedding::q2_0) read the mapped file
  // A tensor the model does not use is a feature of the file that tritium would silently drop: refused.
  if (const auto rest = source->unused(); !rest.empty())
    fail("{}: tensor '{}' is not part of the {} model tritium builds ({} such tensors; an unsupported feature of "
         "this file)",
         path, rest.front(), arch, rest.size());
  file->drop_metadata();  // the model reads only tensor data from here on
  return model;
}

}  // namespace

std::unique_ptr<Transformer> load_transformer(const std::string& path, const LoadOptions& opts) {
  if (!opts.quant.empty()) {
    const auto& names = quant_method_names();
    if (std::find(names.begin(), names.end(), opts.quant) == names.end())
      fail("unknown quantization method '{}' (expected one of: {})", opts.quant, fmt::join(names, ", "));
  }
  if (!opts.lm_head.empty()) {
    const auto& names = lm_head_kind_names();
    if (std::find(names.begin(), names.end(), opts.lm_head) == names.end())
      fail("unknown lm_head storage '{}' (expected one of: {})", opts.lm_head, fmt::join(names, ", "));
  }
  if (is_gguf_path(path)) return return_freed_memory(load_gguf(path, opts));
  ModelConfig c = load_model_config(path);
  auto store = std::make_shared<WeightStore>(path);
  if (is_tritium_model(*store)) return load_tritium_model(std::move(c), std::move(store), opts);
  const SafetensorsSource source(*store, c);
  auto model = build_transformer(std::move(c), source, opts);
  model->set_keep_alive(std::move(store));  // borrowed bf16 tables read the mapped file
  return return_freed_memory(std::move(model));
}

}  // namespace tritium
