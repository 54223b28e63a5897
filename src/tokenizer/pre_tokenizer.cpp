#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace tritium {
namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

/// Splits one string at the regex matches and arranges matches/gaps by `behavior` (HF Split semantics).
std::vector<std::string> split_by(const Regex& re, const std::string& s, Behavior behavior, bool invert) {
  struct Seg {
    size_t b, e;
    bool match;
  };
  std::vector<Seg> segs;
  size_t last = 0;
  for (auto [b, e] : re.find_all(s)) {
    if (b > last) segs.push_back({last, b, invert});
    segs.push_back({b, e, !invert});
    last = e;
  }
  if (last < s.size()) segs.push_back({last, s.size(), invert});

  std::vector<std::string> out;
  bool prev_match = false;
  switch (behavior) {
    case Behavior::Removed:
      for (const Seg& g : segs)
        if (!g.match) out.push_back(s.substr(g.b, g.e - g.b));
      break;
    case Behavior::Isolated:
      for (const Seg& g : segs) out.push_back(s.substr(g.b, g.e - g.b));
      break;
    case Behavior::MergedWithPrevious:  // a match joins the piece before it, unless that is a match too
      for (const Seg& g : segs) {
        if (g.match && !prev_match && !out.empty()) out.back() += s.substr(g.b, g.e - g.b);
        else out.push_back(s.substr(g.b, g.e - g.b));
        prev_match = g.match;
      }
      break;
    case Behavior::MergedWithNext:  // mirror image: walk right to left
      for (size_t k = segs.size(); k-- > 0;) {
        const Seg& g = segs[k];
        if (g.match && !prev_match && !out.empty()) out.back().insert(0, s.substr(g.b, g.e - g.b));
        else out.push_back(s.substr(g.b, g.e - g.b));
        prev_match = g.match;
      }
      std::reverse(out.begin(), out.end());
      break;
    case Behavior::Contiguous:  // runs of adjacent matches become one piece
      for (const Seg& g : segs) {
        if (g.match && prev_match && !out.empty()) out.back() += s.substr(g.b, g.e - g.b);
        else out.push_back(s.substr(g.b, g.e - g.b));
        prev_match = g.match;
      }
      break;
  }
  return out;
}

void apply_split(std::vector<std::string>& pieces, const Regex& re, Behavior behavior, bool invert) {
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const auto& p : pieces) {
    for (auto& sub : split_by(re, p, behavior, invert))
      if (!sub.empty()) out.push_back(std::move(sub));
  }
  pieces = std::move(out);
}

class SplitPre final : public PreTokenizer {
 public:
  SplitPre(std::unique_ptr<Regex> re, Behavior b, bool invert) : re_(std::move(re)), behavior_(b), invert_(invert) {}
  void apply(std::vector<std::string>& pieces) const override { apply_split(pieces, *re_, behavior_, invert_); }

 private:
  std::unique_ptr<Regex> re_;
  Behavior behavior_;
  bool invert_;
};

// The GPT-2 pre-tokenization pattern used by ByteLevel when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPre final : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex, const std::string& where) : add_prefix_space_(add_prefix_space) {
    if (use_regex) re_ = std::make_unique<Regex>(kGpt2Pattern, false, where);
  }
  void apply(std::vector<std::string>& pieces) const override {
    if (add_prefix_space_) {
      for (auto& p : pieces)
        if (p.empty() || p[0] != ' ') p.insert(p.begin(), ' ');
    }
    if (re_) apply_split(pieces, *re_, Behavior::Isolated, false);
    for (auto& p : pieces) p = byte_level::encode(p);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

class SequencePre final : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void apply(std::vector<std::string>& pieces) const override {
    for (const auto& p : parts_) p->apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

bool get_bool(const nlohmann::json& j, const char* key, bool dflt, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_boolean()) fail("{}.{}: expected a boolean", where, key);
  return j[key].get<bool>();
}

Behavior parse_behavior(const nlohmann::json& j, const std::string& where) {
  if (!j.contains("behavior") || !j["behavior"].is_string()) fail("{}.behavior: expected a string", where);
  const std::string b = j["behavior"].get<std::string>();
  if (b == "Removed") return Behavior::Removed;
  if (b == "Isolated") return Behavior::Isolated;
  if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::MergedWithNext;
  if (b == "Contiguous") return Behavior::Contiguous;
  fail("{}.behavior: unsupported value '{}'", where, b);
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) fail("{}: expected an object with a type", where);
  const std::string type = j["type"].get<std::string>();
  if (type == "Split") {
    const auto& pat = j.value("pattern", nlohmann::json());
    std::unique_ptr<Regex> re;
    if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string())
      re = std::make_unique<Regex>(pat["Regex"].get<std::string>(), false, where + ".pattern.Regex");
    else if (pat.is_object() && pat.contains("String") && pat["String"].is_string())
      re = std::make_unique<Regex>(pat["String"].get<std::string>(), true, where + ".pattern.String");
    else
      fail("{}.pattern: expected {{\"Regex\": ...}} or {{\"String\": ...}}", where);
    return std::make_unique<SplitPre>(std::move(re), parse_behavior(j, where), get_bool(j, "invert", false, where));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPre>(get_bool(j, "add_prefix_space", true, where),
                                          get_bool(j, "use_regex", true, where), where);
  }
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) fail("{}.pretokenizers: expected an array", where);
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i) {
      auto p = make_pre_tokenizer(j["pretokenizers"][i], fmt::format("{}.pretokenizers[{}]", where, i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePre>(std::move(parts));
  }
  fail("{}: unsupported pre_tokenizer type '{}'", where, type);
}

}  // namespace tritium
