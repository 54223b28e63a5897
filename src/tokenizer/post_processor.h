// tritium tokenizer: tokenizer.json post-processors, reduced to the ids they add around one sequence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tritium {

/// What encode(text, add_special_tokens=true) adds around the ids of a single sequence.
struct PostProcessor {
  std::vector<int32_t> prefix;  // e.g. {BOS}
  std::vector<int32_t> suffix;  // e.g. {EOS} or {SEP}
};

/// Reads a "post_processor" value: TemplateProcessing ("single" with SpecialToken / Sequence A items and
/// "special_tokens" ids), RobertaProcessing / BertProcessing (cls A sep), ByteLevel (no ids: offsets
/// only), Sequence of these, or null. Throws tritium::Error naming `where` on malformed content.
PostProcessor make_post_processor(const nlohmann::json& j, const std::string& where);

}  // namespace tritium
