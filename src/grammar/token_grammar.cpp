#include "grammar/token_grammar.h"

#include <algorithm>
#include <numeric>

namespace tritium::grammar {

Vocabulary::Vocabulary(std::vector<std::string> bytes) : bytes_(std::move(bytes)) {
  std::vector<int32_t> order;
  for (int32_t i = 0; i < size(); ++i)
    if (!bytes_[static_cast<size_t>(i)].empty()) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  // Breadth-first over groups of the sorted ids that share a prefix: a node is (prefix depth, id range).
  struct Pending {
    uint32_t node;
    size_t lo, hi, depth;
  };
  nodes_.emplace_back();
  std::vector<Pending> level = {{0, 0, order.size(), 0}};
  while (!level.empty()) {
    std::vector<Pending> next;
    for (const Pending& p : level) {
      size_t i = p.lo;
      const uint32_t tb = static_cast<uint32_t>(tokens_.size());
      while (i < p.hi && bytes_[static_cast<size_t>(order[i])].size() == p.depth) tokens_.push_back(order[i++]);
      nodes_[p.node].token_begin = tb;
      nodes_[p.node].token_end = static_cast<uint32_t>(tokens_.size());
      nodes_[p.node].child_begin = static_cast<uint32_t>(nodes_.size());
      while (i < p.hi) {
        const auto c = static_cast<uint8_t>(bytes_[static_cast<size_t>(order[i])][p.depth]);
        size_t j = i;
        while (j < p.hi && static_cast<uint8_t>(bytes_[static_cast<size_t>(order[j])][p.depth]) == c) ++j;
        Node n;
        n.byte = c;
        nodes_.push_back(n);
        next.push_back({static_cast<uint32_t>(nodes_.size() - 1), i, j, p.depth + 1});
        i = j;
      }
      nodes_[p.node].child_end = static_cast<uint32_t>(nodes_.size());
    }
    level = std::move(next);
  }
}

TokenGrammar::TokenGrammar(Nfa nfa, std::shared_ptr<const Vocabulary> vocab, size_t max_cached_masks)
    : nfa_(std::move(nfa)), vocab_(std::move(vocab)), max_masks_(max_cached_masks) {
  // Live states: reverse reachability from accept over byte and epsilon edges.
  const size_t n = nfa_.states.size();
  std::vector<std::vector<int32_t>> rev(n);
  for (size_t s = 0; s < n; ++s) {
    for (const auto& e : nfa_.states[s].edges) rev[static_cast<size_t>(e.to)].push_back(static_cast<int32_t>(s));
    for (int32_t t : nfa_.states[s].eps) rev[static_cast<size_t>(t)].push_back(static_cast<int32_t>(s));
  }
  live_.assign(n, 0);
  std::vector<int32_t> stack = {nfa_.accept};
  live_[static_cast<size_t>(nfa_.accept)] = 1;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t p : rev[static_cast<size_t>(s)])
      if (!live_[static_cast<size_t>(p)]) {
        live_[static_cast<size_t>(p)] = 1;
        stack.push_back(p);
      }
  }
}

void TokenGrammar::closure(std::vector<int32_t>& set) const {
  std::vector<char> seen(nfa_.states.size(), 0);
  std::vector<int32_t> stack;
  for (int32_t s : set)
    if (!seen[static_cast<size_t>(s)]) seen[static_cast<size_t>(s)] = 1, stack.push_back(s);
  set.clear();
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    if (live_[static_cast<size_t>(s)]) set.push_back(s);
    for (int32_t t : nfa_.states[static_cast<size_t>(s)].eps)
      if (!seen[static_cast<size_t>(t)]) seen[static_cast<size_t>(t)] = 1, stack.push_back(t);
  }
  std::sort(set.begin(), set.end());
}

int32_t TokenGrammar::intern(std::vector<int32_t> set) {
  closure(set);
  if (set.empty()) return kDead;
  std::string key(reinterpret_cast<const char*>(set.data()), set.size() * sizeof(int32_t));
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  DState d;
  d.accept = std::binary_search(set.begin(), set.end(), nfa_.accept);
  d.nfa = std::move(set);
  d.next.assign(256, -2);
  states_.push_back(std::move(d));
  const auto id = static_cast<int32_t>(states_.size() - 1);
  index_.emplace(std::move(key), id);
  return id;
}

int32_t TokenGrammar::step(int32_t s, uint8_t b) {
  if (s < 0) return kDead;
  {
    const int32_t n = states_[static_cast<size_t>(s)].next[b];
    if (n != -2) return n;
  }
  std::vector<int32_t> to;
  for (int32_t q : states_[static_cast<size_t>(s)].nfa)
    for (const auto& e : nfa_.states[static_cast<size_t>(q)].edges)
      if (e.lo <= b && b <= e.hi) to.push_back(e.to);
  const int32_t n = to.empty() ? kDead : intern(std::move(to));
  states_[static_cast<size_t>(s)].next[b] = n;  // states_ may have grown: index again
  return n;
}

int32_t TokenGrammar::start() {
  std::lock_guard lk(mu_);
  if (start_ == -2) start_ = intern({nfa_.start});
  return start_;
}

int32_t TokenGrammar::advance(int32_t state, std::string_view bytes) {
  std::lock_guard lk(mu_);
  for (char c : bytes) {
    state = step(state, static_cast<uint8_t>(c));
    if (state == kDead) break;
  }
  return state;
}

bool TokenGrammar::accepting(int32_t state) {
  std::lock_guard lk(mu_);
  return state >= 0 && states_[static_cast<size_t>(state)].accept;
}

bool TokenGrammar::can_continue(int32_t state) {
  std::lock_guard lk(mu_);
  if (state < 0) return false;
  if (states_[static_cast<size_t>(state)].cont < 0) {
    bool any = false;
    for (int b = 0; b < 256 && !any; ++b) {
      // An edge on b from a live state leads to a live state or to nothing: check the edges directly.
      for (int32_t q : states_[static_cast<size_t>(state)].nfa)
        for (const auto& e : nfa_.states[static_cast<size_t>(q)].edges)
          if (e.lo <= b && b <= e.hi && live_[static_cast<size_t>(e.to)]) any = true;
    }
    states_[static_cast<size_t>(state)].cont = any ? 1 : 0;
  }
  return states_[static_cast<size_t>(state)].cont == 1;
}

std::vector<uint64_t> TokenGrammar::compute_mask(int32_t s) {
  const int32_t V = vocab_->size();
  std::vector<uint64_t> m(static_cast<size_t>((V + 63) / 64), 0);
  const auto& nodes = vocab_->nodes();
  const auto& toks = vocab_->tokens();
  std::vector<std::pair<uint32_t, int32_t>> stack;  // (trie node, DFA state after its prefix)
  const auto& root = nodes[0];
  for (uint32_t c = root.child_begin; c < root.child_end; ++c) stack.emplace_back(c, s);
  while (!stack.empty()) {
    const auto [ni, parent] = stack.back();
    stack.pop_back();
    const auto& n = nodes[ni];
    const int32_t st = step(parent, n.byte);
    if (st == kDead) continue;
    for (uint32_t t = n.token_begin; t < n.token_end; ++t) {
      const auto id = static_cast<uint32_t>(toks[t]);
      m[id / 64] |= uint64_t{1} << (id % 64);
    }
    for (uint32_t c = n.child_begin; c < n.child_end; ++c) stack.emplace_back(c, st);
  }
  return m;
}

std::vector<uint64_t> TokenGrammar::mask(int32_t state) {
  std::lock_guard lk(mu_);
  if (state < 0) return std::vector<uint64_t>(static_cast<size_t>((vocab_->size() + 63) / 64), 0);
  if (auto m = states_[static_cast<size_t>(state)].mask) return *m;
  auto m = std::make_shared<const std::vector<uint64_t>>(compute_mask(state));
  if (cached_masks_ < max_masks_) {
    states_[static_cast<size_t>(state)].mask = m;
    ++cached_masks_;
  }
  return *m;
}

size_t TokenGrammar::dfa_states() {
  std::lock_guard lk(mu_);
  return states_.size();
}

}  // namespace tritium::grammar
