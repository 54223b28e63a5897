// tritium template engine: Jinja2 lexer.
#include "template/lexer.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/error.h"

namespace tritium::tmpl {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  Lexer(const std::string& src, const LexOptions& opt) : opt_(opt) {
    // Jinja2 normalizes \r\n and \r to \n (newline_sequence) in template data and string literals.
    src_.reserve(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\r') {
        src_ += '\n';
        if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      } else {
        src_ += src[i];
      }
    }
    if (!opt_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool strip_next = false;     // previous tag ended with '-'
    bool line_starting = true;   // the text that follows starts a line
    while (true) {
      size_t p = find_tag(pos);
      std::string text = src_.substr(pos, p == std::string::npos ? std::string::npos : p - pos);
      size_t text_pos = pos;
      if (strip_next) {
        size_t k = 0;
        while (k < text.size() && is_space(text[k])) ++k;
        text.erase(0, k);
        text_pos += k;
      }
      if (p != std::string::npos) {
        char kind = src_[p + 1];
        char mod = p + 2 < src_.size() ? src_[p + 2] : '\0';
        if (mod == '-') {
          while (!text.empty() && is_space(text.back())) text.pop_back();
        } else if ((kind == '%' || kind == '#') && opt_.lstrip_blocks && mod != '+') {
          size_t l = text.rfind('\n');
          l = (l == std::string::npos) ? 0 : l + 1;
          bool at_line_start = l > 0 || line_starting;
          if (at_line_start && l < text.size() &&
              std::all_of(text.begin() + static_cast<long>(l), text.end(), [](char c) { return is_space(c); }))
            text.erase(l);
        }
      }
      if (!text.empty()) push(Token::Type::Text, text, text_pos);
      if (p == std::string::npos) break;

      char kind = src_[p + 1];
      size_t start = p + 2;
      if (start < src_.size() && (src_[start] == '-' || src_[start] == '+')) ++start;
      size_t end;  // position just after the closing delimiter
      bool strip_after = false, block_like = kind != '{', no_trim = false;
      if (kind == '#') {
        size_t c = src_.find("#}", start);
        if (c == std::string::npos) error(p, "unterminated comment");
        strip_after = c > start && src_[c - 1] == '-';
        no_trim = c > start && src_[c - 1] == '+';
        end = c + 2;
      } else {
        push(kind == '{' ? Token::Type::VarBegin : Token::Type::BlockBegin, "", p);
        end = lex_expression(start, kind, strip_after, no_trim);
      }
      if (block_like && opt_.trim_blocks && !strip_after && !no_trim) {
        if (end < src_.size() && src_[end] == '\n') ++end;
      }
      strip_next = strip_after;
      line_starting = end > 0 && src_[end - 1] == '\n';
      pos = end;
    }
    push(Token::Type::Eof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  void line_col(size_t off, int& line, int& col) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
    line = static_cast<int>(it - line_starts_.begin());
    col = static_cast<int>(off - line_starts_[static_cast<size_t>(line - 1)]) + 1;
  }

  [[noreturn]] void error(size_t off, const std::string& msg) const {
    int line, col;
    line_col(off, line, col);
    fail("chat template syntax error at line {}, column {}: {}", line, col, msg);
  }

  void push(Token::Type t, std::string v, size_t off) {
    Token tok{t, std::move(v)};
    line_col(off, tok.line, tok.col);
    tokens_.push_back(std::move(tok));
  }

  // Lexes tokens of a {{ }} or {% %} tag starting at `i`; returns the offset after the closing delimiter.
  size_t lex_expression(size_t i, char kind, bool& strip_after, bool& no_trim) {
    const char close = kind == '{' ? '}' : '%';
    int depth = 0;  // bracket nesting: "}}" inside a dict literal does not close the tag
    while (true) {
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (i >= src_.size()) error(i, kind == '{' ? "unterminated '{{'" : "unterminated '{%'");
      char c = src_[i];
      if (depth == 0) {
        auto closes_at = [&](size_t k) { return k + 1 < src_.size() && src_[k] == close && src_[k + 1] == '}'; };
        if (closes_at(i)) {
          push(kind == '{' ? Token::Type::VarEnd : Token::Type::BlockEnd, "", i);
          return i + 2;
        }
        if ((c == '-' || (c == '+' && kind == '%')) && closes_at(i + 1)) {
          (c == '-' ? strip_after : no_trim) = true;
          push(kind == '{' ? Token::Type::VarEnd : Token::Type::BlockEnd, "", i);
          return i + 3;
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t s = i;
        while (i < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[i])) || src_[i] == '_')) ++i;
        push(Token::Type::Name, src_.substr(s, i - s), s);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        i = lex_number(i);
      } else if (c == '\'' || c == '"') {
        i = lex_string(i);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* t : two)
          if (src_.compare(i, 2, t) == 0) op = t;
        if (op.empty()) {
          if (!std::strchr("+-*/%~()[]{},.:|=<>;", c) || c == '\0') error(i, fmt::format("unexpected character '{}'", c));
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        push(Token::Type::Op, op, i);
        i += op.size();
      }
    }
  }

  size_t lex_number(size_t i) {
    size_t s = i;
    auto digits = [&] {
      while (i < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[i])) || src_[i] == '_')) ++i;
    };
    digits();
    bool is_float = false;
    if (i + 1 < src_.size() && src_[i] == '.' && std::isdigit(static_cast<unsigned char>(src_[i + 1]))) {
      is_float = true;
      ++i;
      digits();
    }
    if (i < src_.size() && (src_[i] == 'e' || src_[i] == 'E')) {
      size_t k = i + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && std::isdigit(static_cast<unsigned char>(src_[k]))) {
        is_float = true;
        i = k;
        digits();
      }
    }
    std::string v = src_.substr(s, i - s);
    v.erase(std::remove(v.begin(), v.end(), '_'), v.end());
    push(is_float ? Token::Type::Float : Token::Type::Int, v, s);
    return i;
  }

  // Python "unicode-escape" decoding of a string literal, as Jinja2 does.
  size_t lex_string(size_t i) {
    const char q = src_[i];
    size_t s = i++;
    std::string out;
    while (true) {
      if (i >= src_.size()) error(s, "unterminated string literal");
      char c = src_[i];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) error(s, "unterminated string literal");
      char e = src_[i + 1];
      i += 2;
      auto hex = [&](int n) {
        if (i + static_cast<size_t>(n) > src_.size()) error(s, "truncated \\x/\\u escape in string literal");
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
          char h = src_[i++];
          if (!std::isxdigit(static_cast<unsigned char>(h))) error(s, "bad \\x/\\u escape in string literal");
          v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        return v;
      };
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;  // line continuation
        case 'x': append_utf8(out, hex(2)); break;
        case 'u': append_utf8(out, hex(4)); break;
        case 'U': append_utf8(out, hex(8)); break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k)
              v = v * 8 + static_cast<uint32_t>(src_[i++] - '0');
            append_utf8(out, v);
          } else {
            out += '\\';  // unknown escapes stay as written
            out += e;
          }
      }
    }
    push(Token::Type::String, std::move(out), s);
    return i + 1;
  }

  std::string src_;
  LexOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& src, const LexOptions& opt) { return Lexer(src, opt).run(); }

}  // namespace tritium::tmpl
