#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace tritium {

std::string Decoder::decode(const std::vector<const std::string*>& tokens) const {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (kind == Kind::Join) {
      if (i) out.push_back(' ');
      out += *tokens[i];
    } else if (auto bytes = byte_level::decode(*tokens[i])) {
      out += *bytes;
    } else {
      out += *tokens[i];
    }
  }
  return out;
}

Decoder make_decoder(const nlohmann::json& j, const std::string& where) {
  Decoder d;
  if (j.is_null()) return d;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) fail("{}: expected an object with a type", where);
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") {
    d.kind = Decoder::Kind::ByteLevel;
    return d;
  }
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) fail("{}.decoders: expected an array", where);
    for (size_t i = 0; i < j["decoders"].size(); ++i) {
      const Decoder part = make_decoder(j["decoders"][i], fmt::format("{}.decoders[{}]", where, i));
      if (part.kind == Decoder::Kind::ByteLevel) d.kind = Decoder::Kind::ByteLevel;
    }
    return d;
  }
  fail("{}: unsupported decoder type '{}'", where, type);
}

}  // namespace tritium
