// tritium grammar: a compiled grammar over a model's vocabulary, for constrained decoding.
//
// The byte NFA (grammar/nfa.h) is determinized lazily: a DFA state is the set of NFA states reachable after the
// output so far, restricted to states from which the accepting state can still be reached, so every allowed
// token keeps the output completable. Per DFA state the mask of allowed tokens is computed once, by walking the
// vocabulary's byte trie along the DFA (a token is allowed when all its bytes are), and cached, as XGrammar and
// llguidance cache per-state masks: a step costs one cache lookup once the states of a grammar have been seen.
// Tokens with no bytes (special tokens) are never in a mask; the caller allows EOS when accepting(state).
// Thread-safe (one mutex). DFA states are only made along outputs actually generated, so their number is bounded
// by the bytes generated; cached masks are bounded by max_cached_masks (past it masks are recomputed per step).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/nfa.h"

namespace tritium::grammar {

/// The token byte strings of a vocabulary as a trie (built once per tokenizer, shared by every grammar).
class Vocabulary {
 public:
  /// bytes[id]: the raw bytes of token id ("" for special tokens, which a grammar never allows).
  explicit Vocabulary(std::vector<std::string> bytes);
  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

  struct Node {
    uint32_t child_begin = 0, child_end = 0;  ///< children: nodes_[child_begin, child_end), sorted by byte
    uint32_t token_begin = 0, token_end = 0;  ///< tokens ending here: tokens_[token_begin, token_end)
    uint8_t byte = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;  ///< nodes_[0] is the root
  std::vector<int32_t> tokens_;
};

class TokenGrammar {
 public:
  TokenGrammar(Nfa nfa, std::shared_ptr<const Vocabulary> vocab, size_t max_cached_masks = 1024);

  static constexpr int32_t kDead = -1;
  int32_t start();
  /// The state after `bytes` from `state` (kDead when the output can no longer be completed).
  int32_t advance(int32_t state, std::string_view bytes);
  /// The output so far is a complete match (EOS may follow).
  bool accepting(int32_t state);
  /// Some byte may follow (false: the match is complete and nothing can extend it).
  bool can_continue(int32_t state);
  /// Bit i of word i / 64: token i keeps the output completable. vocab size bits.
  std::vector<uint64_t> mask(int32_t state);
  const Vocabulary& vocab() const { return *vocab_; }
  /// DFA states built so far (a measure of the grammar's cost).
  size_t dfa_states();

 private:
  struct DState {
    std::vector<int32_t> nfa;  ///< sorted, epsilon-closed, live NFA states
    std::vector<int32_t> next;  ///< [256]: -2 not computed, kDead, or the next state
    bool accept = false;
    int8_t cont = -1;  ///< can_continue: -1 unknown
    std::shared_ptr<const std::vector<uint64_t>> mask;
  };
  int32_t intern(std::vector<int32_t> set);
  int32_t step(int32_t s, uint8_t b);
  void closure(std::vector<int32_t>& set) const;
  std::vector<uint64_t> compute_mask(int32_t s);

  Nfa nfa_;
  std::shared_ptr<const Vocabulary> vocab_;
  size_t max_masks_, cached_masks_ = 0;
  std::vector<char> live_;  ///< NFA states from which accept is reachable
  std::mutex mu_;
  std::vector<DState> states_;
  std::unordered_map<std::string, int32_t> index_;  ///< NFA set (as bytes) -> DFA state
  int32_t start_ = -2;
};

}  // namespace tritium::grammar
