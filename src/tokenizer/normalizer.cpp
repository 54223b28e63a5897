#include "tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"

namespace tritium {
namespace {

enum class Form { NFC, NFD, NFKC, NFKD };

class UnicodeForm final : public Normalizer {
 public:
  UnicodeForm(Form form, const std::string& where) {
    UErrorCode st = U_ZERO_ERROR;
    switch (form) {
      case Form::NFC: n2_ = icu::Normalizer2::getNFCInstance(st); break;
      case Form::NFD: n2_ = icu::Normalizer2::getNFDInstance(st); break;
      case Form::NFKC: n2_ = icu::Normalizer2::getNFKCInstance(st); break;
      case Form::NFKD: n2_ = icu::Normalizer2::getNFKDInstance(st); break;
    }
    if (U_FAILURE(st) || !n2_) fail("{}: ICU normalizer unavailable: {}", where, u_errorName(st));
  }
  std::string normalize(std::string_view text) const override {
    bool ascii = true;  // ASCII is invariant under every normal form
    for (char c : text) ascii &= static_cast<unsigned char>(c) < 0x80;
    if (ascii) return std::string(text);
    std::string out;
    icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
    UErrorCode st = U_ZERO_ERROR;
    n2_->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr, st);
    if (U_FAILURE(st)) fail("Unicode normalization failed: {}", u_errorName(st));
    return out;
  }

 private:
  const icu::Normalizer2* n2_ = nullptr;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  std::string normalize(std::string_view text) const override {
    std::string s(text);
    for (const auto& p : parts_) s = p->normalize(s);
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) fail("{}: expected an object with a type", where);
  const std::string type = j["type"].get<std::string>();
  if (type == "NFC") return std::make_unique<UnicodeForm>(Form::NFC, where);
  if (type == "NFD") return std::make_unique<UnicodeForm>(Form::NFD, where);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(Form::NFKC, where);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(Form::NFKD, where);
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) fail("{}.normalizers: expected an array", where);
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < j["normalizers"].size(); ++i) {
      auto p = make_normalizer(j["normalizers"][i], fmt::format("{}.normalizers[{}]", where, i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  fail("{}: unsupported normalizer type '{}'", where, type);
}

}  // namespace tritium
