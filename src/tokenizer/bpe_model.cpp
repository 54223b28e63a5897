#include "tokenizer/bpe_model.h"

#include <nlohmann/json.hpp>
#include <queue>

#include "core/error.h"

namespace tritium {

BpeModel::BpeModel(const nlohmann::json& m, const std::string& where) {
  if (!m.is_object()) fail("{}: expected an object", where);
  const std::string type = m.value("type", std::string("BPE"));
  if (type != "BPE") fail("{}.type: unsupported model type '{}' (only BPE)", where, type);
  if (!m.contains("vocab") || !m["vocab"].is_object()) fail("{}.vocab: missing or not an object", where);
  if (!m.contains("merges") || !m["merges"].is_array()) fail("{}.merges: missing or not an array", where);
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(k) && m[k].is_string() && !m[k].get<std::string>().empty())
      fail("{}.{}: non-empty value is not supported", where, k);
  }

  const auto& vocab = m["vocab"];
  vocab_.reserve(vocab.size() * 2);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) fail("{}.vocab[\"{}\"]: id is not an integer", where, it.key());
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id > 100'000'000) fail("{}.vocab[\"{}\"]: id {} out of range", where, it.key(), id);
    vocab_[it.key()] = static_cast<int32_t>(id);
    if (static_cast<size_t>(id) >= id_to_token_.size()) {
      id_to_token_.resize(id + 1);
      assigned_.resize(id + 1, 0);
    }
    id_to_token_[id] = it.key();
    assigned_[id] = 1;
  }

  const auto& merges = m["merges"];
  merges_.reserve(merges.size() * 2);
  std::string a, b;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& e = merges[r];
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        fail("{}.merges[{}]: expected \"a b\" with exactly one space, got \"{}\"", where, r, s);
      a.assign(s, 0, sp);
      b.assign(s, sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      fail("{}.merges[{}]: expected a string \"a b\" or a pair [a, b]", where, r);
    }
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia == vocab_.end()) fail("{}.merges[{}]: token \"{}\" is not in the vocab", where, r, a);
    if (ib == vocab_.end()) fail("{}.merges[{}]: token \"{}\" is not in the vocab", where, r, b);
    auto iab = vocab_.find(a + b);
    if (iab == vocab_.end()) fail("{}.merges[{}]: merged token \"{}{}\" is not in the vocab", where, r, a, b);
    // A repeated pair keeps its last rank, as HF's map construction does.
    merges_.insert_or_assign(key(ia->second, ib->second), Merge{static_cast<int32_t>(r), iab->second});
  }

  ignore_merges_ = m.value("ignore_merges", false);
  byte_fallback_ = m.value("byte_fallback", false);
  fuse_unk_ = m.value("fuse_unk", false);
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    const std::string unk = m["unk_token"].get<std::string>();
    auto it = vocab_.find(unk);
    if (it == vocab_.end()) fail("{}.unk_token: \"{}\" is not in the vocab", where, unk);
    unk_id_ = it->second;
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !assigned_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::add_char(std::string_view ch, std::vector<int32_t>& syms) const {
  auto it = vocab_.find(std::string(ch));
  if (it != vocab_.end()) {
    syms.push_back(it->second);
    return;
  }
  if (byte_fallback_) {  // <0xAB> tokens for each byte, when all exist
    std::vector<int32_t> bytes;
    for (char c : ch) {
      auto b = vocab_.find(fmt::format("<0x{:02X}>", static_cast<uint8_t>(c)));
      if (b == vocab_.end()) break;
      bytes.push_back(b->second);
    }
    if (bytes.size() == ch.size()) {
      syms.insert(syms.end(), bytes.begin(), bytes.end());
      return;
    }
  }
  if (unk_id_) {
    if (fuse_unk_ && !syms.empty() && syms.back() == *unk_id_) return;
    syms.push_back(*unk_id_);
  }
  // No unk token: the character is dropped, as HF does.
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Initial symbols: one per UTF-8 character.
  std::vector<int32_t> sym;
  sym.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    size_t n = 1;
    while (i + n < word.size() && (static_cast<uint8_t>(word[i + n]) & 0xC0) == 0x80) ++n;
    add_char(word.substr(i, n), sym);
    i += n;
  }
  const int n = static_cast<int>(sym.size());
  if (n <= 1) {
    out.insert(out.end(), sym.begin(), sym.end());
    return;
  }
  if (n == 2) {  // fast path
    auto it = merges_.find(key(sym[0], sym[1]));
    if (it != merges_.end()) out.push_back(it->second.id);
    else out.insert(out.end(), sym.begin(), sym.end());
    return;
  }
  // Doubly linked list of symbols + a min-heap of candidate merges (rank, left position), validated lazily.
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    int32_t left, right;  // symbol ids when queued, to detect stale entries
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int i) {
    const int j = next[i];
    if (i < 0 || j < 0) return;
    auto it = merges_.find(key(sym[i], sym[j]));
    if (it != merges_.end()) heap.push({it->second.rank, i, sym[i], sym[j]});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  std::vector<uint8_t> dead(n, 0);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int i = c.pos;
    if (dead[i] || sym[i] != c.left) continue;
    const int j = next[i];
    if (j < 0 || sym[j] != c.right) continue;
    sym[i] = merges_.at(key(c.left, c.right)).id;
    dead[j] = 1;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    if (prev[i] >= 0) push(prev[i]);
    push(i);
  }
  for (int i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
}

}  // namespace tritium
