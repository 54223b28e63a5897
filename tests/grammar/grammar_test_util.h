// Helpers of the grammar tests: a vocabulary of the 256 single bytes, running an NFA on bytes (directly, and
// through a TokenGrammar), and random walks through token masks.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/nfa.h"
#include "grammar/token_grammar.h"

namespace tritium::test {

inline std::shared_ptr<const grammar::Vocabulary> byte_vocab() {
  std::vector<std::string> b;
  for (int i = 0; i < 256; ++i) b.emplace_back(1, static_cast<char>(i));
  return std::make_shared<grammar::Vocabulary>(std::move(b));
}

/// Whether the TokenGrammar of `nfa` over single bytes accepts exactly `s`.
inline bool matches(grammar::Nfa nfa, const std::string& s) {
  grammar::TokenGrammar g(std::move(nfa), byte_vocab());
  const int32_t st = g.advance(g.start(), s);
  return st != grammar::TokenGrammar::kDead && g.accepting(st);
}

/// Whether `nfa` accepts `s`: the set of states reached (epsilon closures included) after every byte.
inline bool nfa_accepts(const grammar::Nfa& nfa, const std::string& s) {
  std::vector<char> in(nfa.states.size(), 0);
  std::vector<int32_t> cur;
  auto add = [&](int32_t q, std::vector<int32_t>& set) {
    std::vector<int32_t> stack = {q};
    while (!stack.empty()) {
      const int32_t x = stack.back();
      stack.pop_back();
      if (in[static_cast<size_t>(x)]) continue;
      in[static_cast<size_t>(x)] = 1;
      set.push_back(x);
      for (int32_t e : nfa.states[static_cast<size_t>(x)].eps) stack.push_back(e);
    }
  };
  add(nfa.start, cur);
  for (char ch : s) {
    const auto c = static_cast<uint8_t>(ch);
    for (int32_t q : cur) in[static_cast<size_t>(q)] = 0;
    std::vector<int32_t> next;
    for (int32_t q : cur)
      for (const auto& e : nfa.states[static_cast<size_t>(q)].edges)
        if (e.lo <= c && c <= e.hi) add(e.to, next);
    cur = std::move(next);
  }
  for (int32_t q : cur)
    if (q == nfa.accept) return true;
  return false;
}

/// Samples tokens uniformly among the allowed ones until the grammar is complete (stopping at an accepting state
/// with probability 1/4); returns the bytes, or "<stuck>" when no token is allowed while not accepting.
inline std::string random_walk(grammar::TokenGrammar& g, std::mt19937& rng, int max_tokens) {
  int32_t st = g.start();
  std::string out;
  for (int t = 0; t < max_tokens; ++t) {
    if (g.accepting(st) && (!g.can_continue(st) || rng() % 4 == 0)) return out;
    const auto m = g.mask(st);
    std::vector<int32_t> ok;
    for (int32_t i = 0; i < g.vocab().size(); ++i)
      if (m[static_cast<size_t>(i) / 64] >> (i % 64) & 1) ok.push_back(i);
    if (ok.empty()) return "<stuck>";
    const int32_t pick = ok[rng() % ok.size()];
    out += g.vocab().bytes(pick);
    st = g.advance(st, g.vocab().bytes(pick));
    if (st == grammar::TokenGrammar::kDead) return "<dead>";
  }
  return out + "<max_tokens>";
}

}  // namespace tritium::test
