#include "grammar/nfa.h"

#include <algorithm>

namespace tritium::grammar {

namespace {
constexpr uint32_t kMaxCp = 0x10FFFF;

int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// Splits [lo, hi] (same encoded length) into ranges whose UTF-8 encodings are byte-wise ranges: every byte after
// the first differing one spans its whole continuation range (the construction of RE2 / Rust's utf8-ranges).
void split_same_len(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_len(lo, lo | m, out);
        split_same_len((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_len(lo, (hi & ~m) - 1, out);
        split_same_len(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = utf8_encode(lo), b = utf8_encode(hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t k = 0; k < a.size(); ++k) seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out.push_back(std::move(seq));
}
}  // namespace

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

CodepointRanges normalize(CodepointRanges r) {
  CodepointRanges cut;
  for (auto [a, b] : r) {
    b = std::min(b, kMaxCp);
    if (a > b) continue;
    if (a < 0xD800 && b >= 0xD800) {  // remove the surrogates
      cut.emplace_back(a, 0xD7FF);
      if (b > 0xDFFF) cut.emplace_back(0xE000, b);
    } else if (a >= 0xD800 && a <= 0xDFFF) {
      if (b > 0xDFFF) cut.emplace_back(0xE000, b);
    } else {
      cut.emplace_back(a, b);
    }
  }
  std::sort(cut.begin(), cut.end());
  CodepointRanges out;
  for (const auto& [a, b] : cut) {
    if (!out.empty() && a <= out.back().second + 1) out.back().second = std::max(out.back().second, b);
    else out.emplace_back(a, b);
  }
  return out;
}

CodepointRanges complement(const CodepointRanges& r) {
  const CodepointRanges n = normalize(r);
  CodepointRanges out;
  uint32_t next = 0;
  for (const auto& [a, b] : n) {
    if (a > next) out.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCp) out.emplace_back(next, kMaxCp);
  return normalize(out);
}

int32_t NfaBuilder::add() {
  if (nfa_.states.size() >= max_states_)
    throw GrammarError(fmt::format("grammar: the automaton exceeds {} states (the schema or pattern is too large: "
                                   "lower maxItems / maxLength / enum sizes or nesting)",
                                   max_states_));
  nfa_.states.emplace_back();
  return static_cast<int32_t>(nfa_.states.size() - 1);
}

Frag NfaBuilder::empty() {
  const int32_t s = add();
  return Frag{s, s, false};
}

Frag NfaBuilder::never() { return Frag{-1, -1, true}; }

Frag NfaBuilder::byte_range(uint8_t lo, uint8_t hi) {
  const int32_t a = add(), b = add();
  nfa_.states[static_cast<size_t>(a)].edges.push_back({lo, hi, b});
  return Frag{a, b, false};
}

Frag NfaBuilder::literal(std::string_view bytes) {
  Frag f = empty();
  int32_t cur = f.in;
  for (char c : bytes) {
    const int32_t n = add();
    nfa_.states[static_cast<size_t>(cur)].edges.push_back({static_cast<uint8_t>(c), static_cast<uint8_t>(c), n});
    cur = n;
  }
  return Frag{f.in, cur, false};
}

Frag NfaBuilder::codepoints(const CodepointRanges& ranges) {
  const CodepointRanges n = normalize(ranges);
  if (n.empty()) return never();
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (auto [a, b] : n) {
    for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {  // split where the encoded length changes
      if (a <= edge && b > edge) {
        split_same_len(a, edge, seqs);
        a = edge + 1;
      }
    }
    split_same_len(a, b, seqs);
  }
  const int32_t in = add(), out = add();
  for (const auto& s : seqs) {
    int32_t cur = in;
    for (size_t k = 0; k < s.size(); ++k) {
      const int32_t to = k + 1 == s.size() ? out : add();
      nfa_.states[static_cast<size_t>(cur)].edges.push_back({s[k].first, s[k].second, to});
      cur = to;
    }
  }
  return Frag{in, out, false};
}

Frag NfaBuilder::seq(const std::vector<Frag>& parts) {
  for (const Frag& p : parts)
    if (p.never) return never();
  if (parts.empty()) return empty();
  for (size_t i = 0; i + 1 < parts.size(); ++i) eps(parts[i].out, parts[i + 1].in);
  return Frag{parts.front().in, parts.back().out, false};
}

Frag NfaBuilder::alt(const std::vector<Frag>& alts) {
  std::vector<Frag> live;
  for (const Frag& a : alts)
    if (!a.never) live.push_back(a);
  if (live.empty()) return never();
  if (live.size() == 1) return live[0];
  const int32_t in = add(), out = add();
  for (const Frag& a : live) {
    eps(in, a.in);
    eps(a.out, out);
  }
  return Frag{in, out, false};
}

Frag NfaBuilder::repeat(const std::function<Frag()>& make, int min, int max) {
  std::vector<Frag> parts;
  // An unbounded repeat loops on its last copy (x{m,} = x^(m-1) x+, x+ one copy whose exit leads back to its
  // entry), so x+ costs one copy, not two: nested loops such as ((x*)+)+ stay linear in size instead of doubling
  // per level.
  const int plain = max < 0 && min > 0 ? min - 1 : min;
  for (int i = 0; i < plain; ++i) {
    parts.push_back(make());
    if (parts.back().never) return never();
  }
  if (max < 0) {
    Frag body = make();
    if (body.never) {
      if (min > 0) return never();
    } else {
      const int32_t hub = add();
      eps(hub, body.in);
      eps(body.out, hub);
      parts.push_back(min > 0 ? Frag{body.in, hub, false} : Frag{hub, hub, false});
    }
  } else {
    // Optional copies nested: (x(x(x)?)?)? so that each copy needs the previous one.
    const int extra = max - min;
    if (extra > 0) {
      const int32_t end = add();
      int32_t cur = add();
      const int32_t first = cur;
      for (int i = 0; i < extra; ++i) {
        Frag x = make();
        if (x.never) break;
        eps(cur, end);
        eps(cur, x.in);
        cur = x.out;
      }
      eps(cur, end);
      parts.push_back(Frag{first, end, false});
    }
  }
  return seq(parts);
}

Nfa NfaBuilder::finish(Frag f) {
  if (f.never) throw GrammarError("grammar: the schema or pattern matches no output at all");
  nfa_.start = f.in;
  nfa_.accept = f.out;
  return std::move(nfa_);
}

}  // namespace tritium::grammar
