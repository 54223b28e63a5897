#include "grammar/number_range.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <vector>

namespace tritium::grammar {

namespace {

using i128 = __int128;
constexpr i128 kInt64Min = std::numeric_limits<int64_t>::min();
constexpr i128 kInt64Max = std::numeric_limits<int64_t>::max();

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string i128_str(i128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  std::string s;
  for (; v != 0; v /= 10) s += static_cast<char>('0' + static_cast<int>(neg ? -(v % 10) : v % 10));
  if (neg) s += '-';
  std::reverse(s.begin(), s.end());
  return s;
}

// The digits as an integer, saturated at 10^30 (beyond every int64).
i128 digits_value(std::string_view digits) {
  i128 v = 0, cap = 1;
  for (int i = 0; i < 30; ++i) cap *= 10;
  for (char c : digits) {
    v = v * 10 + (c - '0');
    if (v >= cap) return cap;
  }
  return v;
}

std::string without_leading_zeros(std::string s) {
  s.erase(0, std::min(s.find_first_not_of('0'), s.size()));
  return s;
}

i128 floor_div(i128 a, i128 m) { return a / m - (a % m != 0 && a < 0 ? 1 : 0); }
i128 ceil_div(i128 a, i128 m) { return a / m + (a % m != 0 && a > 0 ? 1 : 0); }

// The least integer inside a lower bound: ceil(v), or floor(v) + 1 when v is excluded.
i128 least_integer(const Bound& b) {
  const i128 m = digits_value(b.value.int_digits);
  const bool whole = b.value.is_integer();
  if (!b.value.neg) return whole && b.inclusive ? m : m + 1;
  return whole && !b.inclusive ? -m + 1 : -m;
}

// The greatest integer inside an upper bound: floor(v), or ceil(v) - 1 when v is excluded.
i128 greatest_integer(const Bound& b) {
  const i128 m = digits_value(b.value.int_digits);
  const bool whole = b.value.is_integer();
  if (!b.value.neg) return whole && !b.inclusive ? m - 1 : m;
  return whole && b.inclusive ? -m : -m - 1;
}

// A deterministic automaton over the digits 0-9 given by its transitions on keys, wired into the NFA. Only states
// from which an accepting key can be reached are made, so the fragment has no dead ends; keys must not cycle.
class DigitAutomaton {
 public:
  using Key = std::array<int64_t, 6>;
  using Accepting = std::function<bool(const Key&)>;
  using Next = std::function<std::optional<Key>(const Key&, int)>;

  DigitAutomaton(NfaBuilder& b, Accepting accepting, Next next)
      : b_(b), accepting_(std::move(accepting)), next_(std::move(next)) {}

  /// The texts prefix + digits that lead from a start (prefix, key) to an accepting key (never when there is none).
  /// The starts share the automaton's states and its exit.
  Frag build(const std::vector<std::pair<std::string, Key>>& starts) {
    exit_ = b_.empty();
    const Frag entry = b_.empty();
    bool live = false;
    for (const auto& [prefix, k] : starts) {
      const std::optional<Frag> s = state(k);
      if (!s) continue;
      const Frag head = b_.literal(prefix);
      b_.connect(entry, head);
      b_.connect(head, *s);
      live = true;
    }
    return live ? Frag{entry.in, exit_.out, false} : b_.never();
  }

 private:
  // The state of key k, made with its live successors; nullopt when no accepting key is reachable from k.
  std::optional<Frag> state(const Key& k) {
    if (auto it = memo_.find(k); it != memo_.end()) return it->second;
    std::array<std::optional<Frag>, 10> to;
    bool live = accepting_(k);
    for (int d = 0; d < 10; ++d) {
      if (const std::optional<Key> n = next_(k, d)) to[static_cast<size_t>(d)] = state(*n);
      live = live || to[static_cast<size_t>(d)].has_value();
    }
    if (!live) return memo_[k] = std::nullopt;
    const Frag s = b_.empty();
    for (int d = 0; d < 10;) {  // one edge per run of digits with the same successor
      int e = d + 1;
      while (e < 10 && same(to[static_cast<size_t>(e)], to[static_cast<size_t>(d)])) ++e;
      if (to[static_cast<size_t>(d)])
        b_.edge(s, static_cast<uint8_t>('0' + d), static_cast<uint8_t>('0' + e - 1), *to[static_cast<size_t>(d)]);
      d = e;
    }
    if (accepting_(k)) b_.connect(s, exit_);
    return memo_[k] = s;
  }
  static bool same(const std::optional<Frag>& a, const std::optional<Frag>& b) {
    return a.has_value() == b.has_value() && (!a || a->in == b->in);
  }

  NfaBuilder& b_;
  Accepting accepting_;
  Next next_;
  Frag exit_;
  std::map<Key, std::optional<Frag>> memo_;
};

// 10^n in decimal: "1" and n zeros.
std::string power_of_ten(size_t n) {
  std::string s(n + 1, '0');
  s[0] = '1';
  return s;
}

// Naturals in [a, z], written after `prefix` (e.g. "-" for the magnitudes of negative integers).
struct NaturalRange {
  std::string prefix;
  uint64_t a = 0, z = 0;
};

// The decimal texts (no leading zeros) of the naturals of each range that are multiples of m (1 <= m <=
// kMaxModulus), in one automaton. Per range and digit count L the bounds are [lows, highs] of L digits; a key is
// (L, digits read, prefix equals lows', prefix equals highs', prefix mod m, range), or (0, digits left, 0, 0,
// prefix mod m, 0) once the prefix is strictly inside, shared by every L and range.
Frag naturals(NfaBuilder& b, const std::vector<NaturalRange>& ranges, uint64_t m) {
  std::vector<std::vector<std::string>> lows(ranges.size()), highs(ranges.size());
  std::vector<std::pair<std::string, DigitAutomaton::Key>> starts;
  for (size_t g = 0; g < ranges.size(); ++g) {
    if (ranges[g].a > ranges[g].z) continue;
    const std::string za = std::to_string(ranges[g].a), zz = std::to_string(ranges[g].z);
    lows[g].resize(zz.size() + 1);
    highs[g].resize(zz.size() + 1);
    for (size_t len = za.size(); len <= zz.size(); ++len) {
      lows[g][len] = len == za.size() ? za : power_of_ten(len - 1);
      highs[g][len] = len == zz.size() ? zz : std::string(len, '9');
      starts.push_back({ranges[g].prefix, {static_cast<int64_t>(len), 0, 1, 1, 0, static_cast<int64_t>(g)}});
    }
  }
  const auto mod = static_cast<int64_t>(m);
  auto accepting = [](const DigitAutomaton::Key& k) { return k[4] == 0 && (k[0] == 0 ? k[1] == 0 : k[1] == k[0]); };
  auto next = [&](const DigitAutomaton::Key& k, int d) -> std::optional<DigitAutomaton::Key> {
    const int64_t r = (k[4] * 10 + d) % mod;
    if (k[0] == 0) {
      if (k[1] == 0) return std::nullopt;
      return DigitAutomaton::Key{0, k[1] - 1, 0, 0, r, 0};
    }
    const int64_t len = k[0], i = k[1];
    if (i == len) return std::nullopt;
    const auto g = static_cast<size_t>(k[5]);
    const int lo = lows[g][static_cast<size_t>(len)][static_cast<size_t>(i)] - '0';
    const int hi = highs[g][static_cast<size_t>(len)][static_cast<size_t>(i)] - '0';
    if ((k[2] && d < lo) || (k[3] && d > hi)) return std::nullopt;
    const bool tight_lo = k[2] && d == lo, tight_hi = k[3] && d == hi;
    if (!tight_lo && !tight_hi) return DigitAutomaton::Key{0, len - i - 1, 0, 0, r, 0};
    return DigitAutomaton::Key{len, i + 1, tight_lo, tight_hi, r, k[5]};
  };
  return DigitAutomaton(b, accepting, next).build(starts);
}

// The words as a trie: one state per distinct prefix.
Frag trie(NfaBuilder& b, const std::vector<std::string>& words) {
  const Frag root = b.empty(), exit = b.empty();
  std::map<std::pair<int32_t, char>, Frag> child;
  for (const std::string& w : words) {
    Frag cur = root;
    for (char c : w) {
      auto [it, fresh] = child.try_emplace({cur.in, c});
      if (fresh) {
        it->second = b.empty();
        b.edge(cur, static_cast<uint8_t>(c), static_cast<uint8_t>(c), it->second);
      }
      cur = it->second;
    }
    b.connect(cur, exit);
  }
  return words.empty() ? b.never() : Frag{root.in, exit.out, false};
}

// The integers in [lo, hi] (within int64) that are multiples of m <= kMaxModulus: the naturals of each sign.
Frag signed_multiples(NfaBuilder& b, i128 lo, i128 hi, uint64_t m) {
  std::vector<NaturalRange> ranges;
  if (hi >= 0) ranges.push_back({"", static_cast<uint64_t>(std::max<i128>(lo, 0)), static_cast<uint64_t>(hi)});
  if (lo < 0) ranges.push_back({"-", static_cast<uint64_t>(std::max<i128>(-hi, 1)), static_cast<uint64_t>(-lo)});
  return naturals(b, ranges, m);
}

// The multiples of m > kMaxModulus in [lo, hi] listed as a trie, when there are at most kMaxEnumerated of them.
Frag listed_multiples(NfaBuilder& b, i128 lo, i128 hi, uint64_t m, const Decimal& multiple_of) {
  const i128 first = ceil_div(lo, m), last = floor_div(hi, m);
  if (last - first + 1 > static_cast<i128>(kMaxEnumerated))
    throw GrammarError(fmt::format("json schema: 'multipleOf' {} allows {} integers in [{}, {}]; a multipleOf above {} "
                                   "is supported with at most {} multiples in range (narrow 'minimum' / 'maximum')",
                                   multiple_of.str(), i128_str(last - first + 1), i128_str(lo), i128_str(hi),
                                   kMaxModulus, kMaxEnumerated));
  std::vector<std::string> words;
  for (i128 k = first; k <= last; ++k) words.push_back(i128_str(k * m));
  return trie(b, words);
}

// The integers that are multiples of m are the multiples of m's numerator in lowest terms (for m = p/q with
// gcd(p, q) = 1, k/m = kq/p is an integer exactly when p divides k). nullopt when that numerator is above 2^63:
// then 0 is the only multiple within int64.
std::optional<uint64_t> integer_modulus(const Decimal& m) {
  const std::string digits = without_leading_zeros(m.int_digits + m.frac_digits);
  if (digits.empty() || digits.size() > 19) return std::nullopt;
  uint64_t p = std::stoull(digits);
  for (size_t i = 0; i < m.frac_digits.size() && p % 2 == 0; ++i) p /= 2;  // the denominator is 10^frac digits
  for (size_t i = 0; i < m.frac_digits.size() && p % 5 == 0; ++i) p /= 5;
  if (p > static_cast<uint64_t>(kInt64Max)) return std::nullopt;
  return p;
}

// A fraction bound: the fraction digits of a bound whose integer part equals the text's, and whether equality is in.
struct FractionBound {
  std::string digits;
  bool inclusive = true;
};

// Digit budget of a fraction: at most `digits` digits, of which those past the first `significant` are zeros.
struct FractionDigits {
  size_t digits = kFractionDigits, significant = kFractionDigits;
};

// The optional fraction "." + digits whose value 0.F is within lo and hi. A key is (digits read, prefix equals
// lo's, prefix equals hi's, 0, 0, 0): a digit above lo's (below hi's) frees that side for good.
Frag fraction(NfaBuilder& b, const std::optional<FractionBound>& lo, const std::optional<FractionBound>& hi,
              FractionDigits cap) {
  auto at = [](const FractionBound& f, int64_t p) {
    return static_cast<size_t>(p) < f.digits.size() ? f.digits[static_cast<size_t>(p)] - '0' : 0;
  };
  // At the end of the text a tight side compares its padded digits with the rest of the bound's (non-zero unless
  // the bound has no more digits).
  auto lo_ok = [&](int64_t p) { return static_cast<size_t>(p) >= lo->digits.size() && lo->inclusive; };
  auto hi_ok = [&](int64_t p) { return static_cast<size_t>(p) < hi->digits.size() || hi->inclusive; };
  auto accepting = [&](const DigitAutomaton::Key& k) {
    return k[0] > 0 && (!k[1] || lo_ok(k[0])) && (!k[2] || hi_ok(k[0]));
  };
  auto next = [&](const DigitAutomaton::Key& k, int d) -> std::optional<DigitAutomaton::Key> {
    if (static_cast<size_t>(k[0]) == cap.digits || (static_cast<size_t>(k[0]) >= cap.significant && d != 0))
      return std::nullopt;
    if ((k[1] && d < at(*lo, k[0])) || (k[2] && d > at(*hi, k[0]))) return std::nullopt;
    return DigitAutomaton::Key{k[0] + 1, k[1] && d == at(*lo, k[0]), k[2] && d == at(*hi, k[0]), 0, 0, 0};
  };
  const Frag digits = DigitAutomaton(b, accepting, next).build({{"", {0, lo.has_value(), hi.has_value(), 0, 0, 0}}});
  const bool none_ok = (!lo || lo_ok(0)) && (!hi || hi_ok(0));
  return b.alt({none_ok ? b.empty() : b.never(), b.seq({b.literal("."), digits})});
}

// Non-negative decimals without exponent in [lo, hi] (hi absent: open), integer part at most 2^63 - 1: the integer
// part by the digit automaton, fraction digits constrained where the integer part equals a bound's.
Frag magnitude(NfaBuilder& b, const Bound& lo, const std::optional<Bound>& hi, FractionDigits cap) {
  const i128 li = digits_value(lo.value.int_digits);
  if (li > kInt64Max) return b.never();
  const bool open = !hi || digits_value(hi->value.int_digits) > kInt64Max;
  const i128 ui = open ? kInt64Max : digits_value(hi->value.int_digits);
  if (li > ui) return b.never();
  const FractionBound flo{lo.value.frac_digits, lo.inclusive};
  std::optional<FractionBound> fhi;
  if (!open) fhi = FractionBound{hi->value.frac_digits, hi->inclusive};
  auto whole = [&](i128 v) { return b.literal(i128_str(v)); };
  if (li == ui) return b.seq({whole(li), fraction(b, flo, fhi, cap)});
  std::vector<Frag> parts = {b.seq({whole(li), fraction(b, flo, std::nullopt, cap)})};
  const i128 inner_hi = open ? ui : ui - 1;
  if (li + 1 <= inner_hi)
    parts.push_back(b.seq({naturals(b, {{"", static_cast<uint64_t>(li + 1), static_cast<uint64_t>(inner_hi)}}, 1),
                           fraction(b, std::nullopt, std::nullopt, cap)}));
  if (!open) parts.push_back(b.seq({whole(ui), fraction(b, std::nullopt, fhi, cap)}));
  return b.alt(parts);
}

bool is_power_of_ten_below_one(const Decimal& m) {
  return m.int_digits == "0" && !m.frac_digits.empty() &&
         m.frac_digits.find_first_not_of('0') == m.frac_digits.size() - 1 && m.frac_digits.back() == '1';
}

int compare_magnitude(const Decimal& a, const Decimal& b) {
  if (a.int_digits.size() != b.int_digits.size()) return a.int_digits.size() < b.int_digits.size() ? -1 : 1;
  // Fraction digits carry no trailing zeros, so their lexicographic order is their numeric order.
  const int c = a.int_digits != b.int_digits ? a.int_digits.compare(b.int_digits) : a.frac_digits.compare(b.frac_digits);
  return (c > 0) - (c < 0);
}

// Whether v / m is an integer: v = V / 10^i and m = M / 10^k, so M * 10^i must divide V * 10^k.
bool is_multiple(const Decimal& v, const Decimal& m) {
  const size_t common = std::min(v.frac_digits.size(), m.frac_digits.size());
  const std::string num = without_leading_zeros(v.int_digits + v.frac_digits + std::string(m.frac_digits.size() - common, '0'));
  const std::string den = without_leading_zeros(m.int_digits + m.frac_digits + std::string(v.frac_digits.size() - common, '0'));
  if (num.empty()) return true;  // zero is a multiple of everything
  if (den.empty()) return false;
  if (num.size() > 30 || den.size() > 30)
    throw GrammarError(fmt::format("json schema: 'multipleOf' {}: whether {} is a multiple is beyond the exact "
                                   "arithmetic used (30 digits)", m.str(), v.str()));
  return digits_value(num) % digits_value(den) == 0;
}

}  // namespace

Decimal Decimal::parse(std::string_view t) {
  auto fail = [&] { return GrammarError(fmt::format("json schema: '{}' is not a finite JSON number", t)); };
  size_t i = 0;
  Decimal d;
  const bool neg = i < t.size() && t[i] == '-';
  if (neg) ++i;
  std::string digits;
  size_t int_len = 0;
  while (i < t.size() && is_digit(t[i])) digits += t[i++];
  int_len = digits.size();
  if (int_len == 0) throw fail();
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && is_digit(t[i])) digits += t[i++];
    if (digits.size() == int_len) throw fail();
  }
  int64_t exp = 0;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    const bool eneg = i < t.size() && t[i] == '-';
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    if (i == t.size()) throw fail();
    for (; i < t.size() && is_digit(t[i]); ++i) {
      exp = exp * 10 + (t[i] - '0');
      if (exp > 1000) throw fail();  // beyond every double
    }
    if (eneg) exp = -exp;
  }
  if (i != t.size()) throw fail();
  // The decimal point sits after `point` digits of `digits` (before them when negative).
  const int64_t point = static_cast<int64_t>(int_len) + exp, n = static_cast<int64_t>(digits.size());
  if (point <= 0) {  // int_digits stays "0"
    d.frac_digits.assign(static_cast<size_t>(-point), '0');
    d.frac_digits += digits;
  } else if (point >= n) {
    d.int_digits = digits + std::string(static_cast<size_t>(point - n), '0');
  } else {
    d.int_digits = digits.substr(0, static_cast<size_t>(point));
    d.frac_digits = digits.substr(static_cast<size_t>(point));
  }
  d.int_digits.erase(0, std::min(d.int_digits.find_first_not_of('0'), d.int_digits.size() - 1));
  d.frac_digits.erase(std::min(d.frac_digits.find_last_not_of('0') + 1, d.frac_digits.size()));
  d.neg = neg && !(d.int_digits == "0" && d.frac_digits.empty());
  return d;
}

Decimal Decimal::negated() const {
  Decimal d = *this;
  d.neg = !neg && !(int_digits == "0" && frac_digits.empty());
  return d;
}

std::string Decimal::str() const {
  return (neg ? "-" : "") + int_digits + (frac_digits.empty() ? "" : "." + frac_digits);
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.neg != b.neg) return a.neg ? -1 : 1;
  const int m = compare_magnitude(a, b);
  return a.neg ? -m : m;
}

void NumberConstraints::tighten_lower(const Bound& b) {
  if (!lower) {
    lower = b;
    return;
  }
  const int c = compare(b.value, lower->value);
  if (c > 0) lower = b;
  else if (c == 0) lower->inclusive = lower->inclusive && b.inclusive;
}

void NumberConstraints::tighten_upper(const Bound& b) {
  if (!upper) {
    upper = b;
    return;
  }
  const int c = compare(b.value, upper->value);
  if (c < 0) upper = b;
  else if (c == 0) upper->inclusive = upper->inclusive && b.inclusive;
}

Frag integer_in_range(NfaBuilder& b, const NumberConstraints& c) {
  const i128 lo = c.lower ? std::max(least_integer(*c.lower), kInt64Min) : kInt64Min;
  const i128 hi = c.upper ? std::min(greatest_integer(*c.upper), kInt64Max) : kInt64Max;
  if (lo > hi) return b.never();
  uint64_t m = 1;
  if (c.multiple_of) {
    const std::optional<uint64_t> p = integer_modulus(*c.multiple_of);
    if (!p) return lo <= 0 && hi >= 0 ? b.literal("0") : b.never();
    m = *p;
  }
  if (m <= kMaxModulus) return signed_multiples(b, lo, hi, m);
  return listed_multiples(b, lo, hi, m, *c.multiple_of);
}

Frag number_in_range(NfaBuilder& b, const NumberConstraints& c) {
  FractionDigits cap;
  if (c.lower) cap.digits = std::max(cap.digits, c.lower->value.frac_digits.size());
  if (c.upper) cap.digits = std::max(cap.digits, c.upper->value.frac_digits.size());
  cap.significant = cap.digits;
  if (c.multiple_of) {
    const Decimal& m = *c.multiple_of;
    if (m.is_integer()) {  // an integer, written as one or with a fraction of zeros ("10", "10.0")
      return b.seq({integer_in_range(b, c),
                    b.alt({b.empty(), b.seq({b.literal("."), b.repeat([&] { return b.literal("0"); }, 1,
                                                                        static_cast<int>(kFractionDigits))})})});
    }
    if (!is_power_of_ten_below_one(m))
      throw GrammarError(fmt::format("json schema: 'multipleOf' {} on a number is supported only as an integer or a "
                                     "power of ten below one (0.1, 0.01, ...)", m.str()));
    cap.significant = m.frac_digits.size();
  }
  std::vector<Frag> parts;
  if (!c.upper || !c.upper->value.neg) {  // x >= 0
    const Bound lo = c.lower && !c.lower->value.neg ? *c.lower : Bound{Decimal{}, true};
    parts.push_back(magnitude(b, lo, c.upper, cap));
  }
  if (!c.lower || c.lower->value.neg) {  // x < 0, written "-" y with y > 0 (so never "-0")
    const Bound lo = c.upper && c.upper->value.neg ? Bound{c.upper->value.negated(), c.upper->inclusive}
                                                   : Bound{Decimal{}, false};
    std::optional<Bound> hi;
    if (c.lower) hi = Bound{c.lower->value.negated(), c.lower->inclusive};
    parts.push_back(b.seq({b.literal("-"), magnitude(b, lo, hi, cap)}));
  }
  return b.alt(parts);
}

bool satisfies(const Decimal& v, const NumberConstraints& c) {
  if (c.lower) {
    const int r = compare(v, c.lower->value);
    if (r < 0 || (r == 0 && !c.lower->inclusive)) return false;
  }
  if (c.upper) {
    const int r = compare(v, c.upper->value);
    if (r > 0 || (r == 0 && !c.upper->inclusive)) return false;
  }
  return !c.multiple_of || is_multiple(v, *c.multiple_of);
}

}  // namespace tritium::grammar
