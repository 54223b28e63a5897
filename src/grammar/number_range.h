// tritium grammar: JSON numbers under the numeric keywords of JSON Schema (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, multipleOf), compiled to NFA fragments exactly: every text the fragment accepts has a value
// inside the bounds and a multiple of multipleOf, decided with exact decimal arithmetic (a bound is the decimal the
// schema writes, e.g. 0.1, never its nearest double).
//
// Integers are written in decimal without leading zeros, exponent or "-0", within int64. A range is a digit-level
// automaton (the range-to-regex construction: per digit count, states "equal to the lower bound's prefix", "equal
// to the upper bound's prefix", or free), and multipleOf m is folded in as the residue of the prefix mod m, so
// divisibility is exact for any range. Moduli up to kMaxModulus are built that way; a larger modulus is
// enumerated as a digit trie when at most kMaxEnumerated of its multiples lie in the range, and refused otherwise.
//
// Numbers with bounds are written without exponent, with an integer part below 2^63 in magnitude (the same digit
// automaton) and at most kFractionDigits fraction digits (more when a bound has more). Fraction digits are
// constrained only where the integer part equals a bound's: e.g. 0 <= x <= 1.5 is "0", "0.xxx", "1", "1.0",
// "1.4xx", "1.5", "1.50", ... multipleOf on a number is supported when it is an integer (the number is then an
// integer, written as one or followed by a fraction of zeros: "10", "10.0") or a power of ten below one, 10^-k
// (at most k fraction digits other than trailing zeros: "0.25", "0.250" for 0.01); other values of multipleOf
// (0.25, 2.5) are a GrammarError naming it. A range with no value gives the never fragment.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "grammar/nfa.h"

namespace tritium::grammar {

/// A finite decimal: (neg ? -1 : 1) * int_digits.frac_digits, int_digits without leading zeros ("0" for zero),
/// frac_digits without trailing zeros; zero is never negative.
struct Decimal {
  bool neg = false;
  std::string int_digits = "0", frac_digits;

  /// Parses JSON number text ("-12.50", "1e+30", "2.5E-3"). Throws GrammarError when it is not one.
  static Decimal parse(std::string_view text);
  bool is_integer() const { return frac_digits.empty(); }
  Decimal negated() const;
  /// The shortest text of the value ("1.5", "-3", "0.001").
  std::string str() const;
};

/// -1, 0 or 1 as a < b, a == b or a > b.
int compare(const Decimal& a, const Decimal& b);

/// One end of a range: its value and whether the value itself is inside.
struct Bound {
  Decimal value;
  bool inclusive = true;
};

/// The numeric keywords of one schema: bounds (absent: open) and multipleOf (absent: none).
struct NumberConstraints {
  std::optional<Bound> lower, upper;
  std::optional<Decimal> multiple_of;

  bool empty() const { return !lower && !upper && !multiple_of; }
  /// Keeps the tighter of the current lower bound and `b` (the greater value; at equal values the exclusive one).
  void tighten_lower(const Bound& b);
  void tighten_upper(const Bound& b);
};

inline constexpr uint64_t kMaxModulus = 10000;     ///< largest multipleOf built as a residue automaton
inline constexpr uint64_t kMaxEnumerated = 1000;   ///< most multiples of a larger multipleOf listed as a trie
inline constexpr size_t kFractionDigits = 15;      ///< fraction digits of a bounded number

/// An integer satisfying `c`. Throws GrammarError naming multipleOf when it cannot be built.
Frag integer_in_range(NfaBuilder& b, const NumberConstraints& c);
/// A number satisfying `c` (an integer when multipleOf is an integer). Throws GrammarError naming multipleOf when
/// multipleOf is not an integer or a power of ten below one.
Frag number_in_range(NfaBuilder& b, const NumberConstraints& c);
/// Whether the value `v` satisfies `c` (for enum and const members). Throws GrammarError naming multipleOf when
/// the quotient is too large to decide.
bool satisfies(const Decimal& v, const NumberConstraints& c);

}  // namespace tritium::grammar
