#pragma once
// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014): a 64-bit
// mixing function and the small deterministic generator built on it. Used for synthetic weights (the same seed
// gives the same model on every machine) and for hashing; not for anything that needs unpredictability.
#include <cstdint>

namespace tritium {

/// SplitMix64's output function applied to x + the golden-ratio increment: a bijection on 64 bits whose outputs
/// for consecutive inputs are well distributed.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The generator: state s advances by the golden-ratio increment per draw.
struct SplitMix64 {
  uint64_t s = 0;
  uint64_t next() {
    const uint64_t r = splitmix64(s);
    s += 0x9e3779b97f4a7c15ull;
    return r;
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

}  // namespace tritium
