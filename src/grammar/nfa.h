// tritium grammar: a byte-level NFA (Thompson construction) and the builder the regex and JSON Schema compilers
// use. States have byte-range edges and epsilon edges; a fragment has one entry and one exit state. Code point
// ranges are encoded as UTF-8 byte-range sequences (surrogates excluded), so every accepted byte string is valid
// UTF-8 when every literal is.
// The builder counts states and throws GrammarError past its budget, which bounds compilation time and memory
// for any input.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tritium::grammar {

/// A grammar that cannot be compiled: invalid or unsupported input, or over the size budget. The message names
/// the offending keyword or construct.
class GrammarError : public Error {
 public:
  using Error::Error;
};

struct Nfa {
  struct Edge {
    uint8_t lo, hi;
    int32_t to;
  };
  struct State {
    std::vector<Edge> edges;
    std::vector<int32_t> eps;
  };
  std::vector<State> states;
  int32_t start = 0, accept = 0;
};

/// A piece of automaton: entry `in`, exit `out`. `never`: the empty language (no string matches; e.g. a recursive
/// reference cut at the depth limit); sequences with it are never, alternatives drop it.
struct Frag {
  int32_t in = -1, out = -1;
  bool never = false;
};

/// Inclusive code point ranges.
using CodepointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

/// Sorted, merged ranges with the surrogates D800-DFFF removed, clipped to 0..10FFFF.
CodepointRanges normalize(CodepointRanges r);
/// The code points of 0..10FFFF (surrogates excluded) not in r.
CodepointRanges complement(const CodepointRanges& r);

class NfaBuilder {
 public:
  explicit NfaBuilder(size_t max_states = 400000) : max_states_(max_states) {}

  Frag empty();
  Frag never();
  Frag byte_range(uint8_t lo, uint8_t hi);
  Frag literal(std::string_view bytes);
  /// Any code point of `ranges`, UTF-8 encoded.
  Frag codepoints(const CodepointRanges& ranges);
  Frag seq(const std::vector<Frag>& parts);
  Frag alt(const std::vector<Frag>& alts);
  /// make() called once per copy: min copies, then (max - min) optional ones; when max < 0, max(min, 1) copies, the
  /// last one looping.
  Frag repeat(const std::function<Frag()>& make, int min, int max);
  /// An epsilon edge from `from`'s exit to `to`'s entry (for automata wired by hand).
  void connect(const Frag& from, const Frag& to) { eps(from.out, to.in); }
  /// A byte-range edge from `from`'s exit to `to`'s entry (for automata wired by hand).
  void edge(const Frag& from, uint8_t lo, uint8_t hi, const Frag& to) {
    nfa_.states[static_cast<size_t>(from.out)].edges.push_back({lo, hi, to.in});
  }
  /// Finishes: the NFA whose language is f's.
  Nfa finish(Frag f);
  size_t size() const { return nfa_.states.size(); }

 private:
  int32_t add();
  void eps(int32_t from, int32_t to) { nfa_.states[static_cast<size_t>(from)].eps.push_back(to); }
  Nfa nfa_;
  size_t max_states_;
};

/// UTF-8 encoding of one code point.
std::string utf8_encode(uint32_t cp);

}  // namespace tritium::grammar
