#include "grammar/regex.h"

#include <fmt/format.h>

#include <vector>

namespace tritium::grammar {

struct Regex::Node {
  enum class Kind { kChars, kSeq, kAlt, kRepeat } kind = Kind::kSeq;
  CodepointRanges chars;  // kChars
  std::vector<std::shared_ptr<const Node>> kids;
  int min = 0, max = 0;  // kRepeat (max -1: unbounded)
};

namespace {

using NodeP = std::shared_ptr<const Regex::Node>;
using Node = Regex::Node;

constexpr int kMaxRepeat = 1000;
constexpr int kMaxGroupDepth = 200;

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  NodeP parse() {
    if (peek('^')) ++i_;
    NodeP n = alternation();
    if (i_ < p_.size()) error("unbalanced ')'");
    return n;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    throw GrammarError(fmt::format("regex: {} at offset {} of '{}'", what, i_, std::string(p_)));
  }
  bool peek(char c) const { return i_ < p_.size() && p_[i_] == c; }

  uint32_t next_codepoint() {
    const auto c0 = static_cast<unsigned char>(p_[i_]);
    int n = c0 < 0x80 ? 1 : (c0 >> 5) == 6 ? 2 : (c0 >> 4) == 14 ? 3 : (c0 >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + static_cast<size_t>(n) > p_.size()) error("invalid UTF-8");
    uint32_t cp = n == 1 ? c0 : n == 2 ? (c0 & 0x1F) : n == 3 ? (c0 & 0x0F) : (c0 & 0x07);
    for (int k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(p_[i_ + static_cast<size_t>(k)]);
      if ((c >> 6) != 2) error("invalid UTF-8");
      cp = (cp << 6) | (c & 0x3F);
    }
    i_ += static_cast<size_t>(n);
    return cp;
  }

  static NodeP chars(CodepointRanges r) {
    auto n = std::make_shared<Node>();
    n->kind = Node::Kind::kChars;
    n->chars = normalize(std::move(r));
    return n;
  }

  NodeP alternation() {
    std::vector<NodeP> alts{sequence()};
    while (peek('|')) {
      ++i_;
      alts.push_back(sequence());
    }
    if (alts.size() == 1) return alts[0];
    auto n = std::make_shared<Node>();
    n->kind = Node::Kind::kAlt;
    n->kids = std::move(alts);
    return n;
  }

  NodeP sequence() {
    auto n = std::make_shared<Node>();
    n->kind = Node::Kind::kSeq;
    while (i_ < p_.size() && !peek('|') && !peek(')')) {
      if (peek('$') && i_ + 1 == p_.size()) {
        ++i_;
        break;
      }
      n->kids.push_back(quantified());
    }
    return n;
  }

  int number() {
    size_t start = i_;
    long v = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      v = v * 10 + (p_[i_] - '0');
      if (v > kMaxRepeat) error(fmt::format("repetition count over {}", kMaxRepeat));
      ++i_;
    }
    if (i_ == start) error("expected a number in {m,n}");
    return static_cast<int>(v);
  }

  NodeP quantified() {
    NodeP a = atom();
    for (;;) {
      int mn = -1, mx = -1;
      if (peek('*')) mn = 0, mx = -1, ++i_;
      else if (peek('+')) mn = 1, mx = -1, ++i_;
      else if (peek('?')) mn = 0, mx = 1, ++i_;
      else if (peek('{')) {
        ++i_;
        mn = number();
        mx = mn;
        if (peek(',')) {
          ++i_;
          mx = peek('}') ? -1 : number();
        }
        if (!peek('}')) error("expected '}'");
        ++i_;
        if (mx >= 0 && mx < mn) error("{m,n} with n < m");
      } else {
        return a;
      }
      if (peek('?')) ++i_;  // lazy: same language
      auto r = std::make_shared<Node>();
      r->kind = Node::Kind::kRepeat;
      r->kids = {a};
      r->min = mn;
      r->max = mx;
      a = r;
    }
  }

  CodepointRanges escape_class(char c, bool& is_class) {
    is_class = true;
    const CodepointRanges digit = {{'0', '9'}}, word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
                          space = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}};
    switch (c) {
      case 'd': return digit;
      case 'D': return complement(digit);
      case 'w': return word;
      case 'W': return complement(word);
      case 's': return space;
      case 'S': return complement(space);
      default: is_class = false; return {};
    }
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (i_ >= p_.size()) error("truncated hex escape");
      const char c = p_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else error("bad hex digit");
    }
    return v;
  }

  // After a backslash: a class (\d...) into `cls`, or one code point.
  uint32_t escape(CodepointRanges& cls, bool& is_class) {
    if (i_ >= p_.size()) error("trailing backslash");
    const char c = p_[i_++];
    cls = escape_class(c, is_class);
    if (is_class) return 0;
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'b': case 'B': error("word boundaries (\\b, \\B) are not supported");
      default: break;
    }
    if ((c >= '1' && c <= '9') || c == 'k') error("backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) error(fmt::format("unknown escape \\{}", c));
    --i_;
    return next_codepoint();
  }

  NodeP klass() {
    bool negate = false;
    if (peek('^')) negate = true, ++i_;
    CodepointRanges r;
    bool first = true;
    while (i_ < p_.size() && (first || !peek(']'))) {
      first = false;
      uint32_t lo;
      if (peek('\\')) {
        ++i_;
        CodepointRanges cls;
        bool is_class = false;
        lo = escape(cls, is_class);
        if (is_class) {
          r.insert(r.end(), cls.begin(), cls.end());
          continue;
        }
      } else {
        lo = next_codepoint();
      }
      uint32_t hi = lo;
      if (peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (peek('\\')) {
          ++i_;
          CodepointRanges cls;
          bool is_class = false;
          hi = escape(cls, is_class);
          if (is_class) error("a class cannot end a range");
        } else {
          hi = next_codepoint();
        }
        if (hi < lo) error("range out of order");
      }
      r.emplace_back(lo, hi);
    }
    if (!peek(']')) error("unterminated '['");
    ++i_;
    return chars(negate ? complement(r) : r);
  }

  NodeP atom() {
    if (i_ >= p_.size()) error("expected an expression");
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (++depth_ > kMaxGroupDepth) error(fmt::format("groups nested deeper than {}", kMaxGroupDepth));
      if (peek('?')) {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') i_ += 2;
        else error("lookaround and named groups are not supported");
      }
      NodeP n = alternation();
      if (!peek(')')) error("missing ')'");
      ++i_;
      --depth_;
      return n;
    }
    if (c == '[') {
      ++i_;
      return klass();
    }
    if (c == '.') {
      ++i_;
      return chars(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '\\') {
      ++i_;
      CodepointRanges cls;
      bool is_class = false;
      const uint32_t cp = escape(cls, is_class);
      return chars(is_class ? cls : CodepointRanges{{cp, cp}});
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') error(fmt::format("nothing to repeat before '{}'", c));
    if (c == '^' || c == '$') error("anchors inside the pattern are not supported (the match is always whole)");
    const uint32_t cp = next_codepoint();
    return chars({{cp, cp}});
  }

  std::string_view p_;
  size_t i_ = 0;
  int depth_ = 0;
};

Frag build_node(NfaBuilder& b, const Node& n, bool js) {
  switch (n.kind) {
    case Node::Kind::kChars: return js ? json_string_chars(b, n.chars) : b.codepoints(n.chars);
    case Node::Kind::kSeq: {
      std::vector<Frag> parts;
      for (const auto& k : n.kids) parts.push_back(build_node(b, *k, js));
      return b.seq(parts);
    }
    case Node::Kind::kAlt: {
      std::vector<Frag> alts;
      for (const auto& k : n.kids) alts.push_back(build_node(b, *k, js));
      return b.alt(alts);
    }
    case Node::Kind::kRepeat: return b.repeat([&] { return build_node(b, *n.kids[0], js); }, n.min, n.max);
  }
  return b.never();
}

}  // namespace

Regex Regex::parse(std::string_view pattern) {
  Regex r;
  r.root_ = Parser(pattern).parse();
  return r;
}

Frag Regex::build(NfaBuilder& b, bool json_string) const { return build_node(b, *root_, json_string); }

std::string json_escape_codepoint(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (cp < 0x20) return fmt::format("\\u{:04x}", cp);
  return utf8_encode(cp);
}

Frag json_string_chars(NfaBuilder& b, const CodepointRanges& ranges) {
  // Code points written as themselves, and the few that a JSON string must escape, each as its escape.
  CodepointRanges raw;
  std::vector<Frag> alts;
  for (auto [lo, hi] : normalize(ranges)) {
    for (uint32_t cp = lo; cp <= hi && cp < 0x20; ++cp) alts.push_back(b.literal(json_escape_codepoint(cp)));
    lo = std::max<uint32_t>(lo, 0x20);
    for (uint32_t special : {uint32_t{'"'}, uint32_t{'\\'}}) {
      if (lo <= special && special <= hi) {
        alts.push_back(b.literal(json_escape_codepoint(special)));
        if (lo < special) raw.emplace_back(lo, special - 1);
        lo = special + 1;
      }
    }
    if (lo <= hi) raw.emplace_back(lo, hi);
  }
  if (!raw.empty()) alts.push_back(b.codepoints(raw));
  return b.alt(alts);
}

}  // namespace tritium::grammar
