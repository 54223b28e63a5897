// tritium template engine: Python str semantics over UTF-8 strings.
#include "template/pystr.h"

#include <algorithm>

#include "core/error.h"

namespace tritium::tmpl::pystr {

std::vector<size_t> code_point_offsets(const std::string& s) {
  std::vector<size_t> offs;
  offs.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offs.push_back(i);
  offs.push_back(s.size());
  return offs;
}

size_t length(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1f);
}

std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  std::vector<std::string> set;
  if (chars) {
    auto offs = code_point_offsets(*chars);
    for (size_t k = 0; k + 1 < offs.size(); ++k) set.push_back(chars->substr(offs[k], offs[k + 1] - offs[k]));
  }
  auto offs = code_point_offsets(s);
  size_t b = 0, e = offs.size() - 1;  // code point range [b, e)
  auto strippable = [&](size_t k) {
    std::string cp = s.substr(offs[k], offs[k + 1] - offs[k]);
    if (!chars) return cp.size() == 1 && is_space(cp[0]);
    return std::find(set.begin(), set.end(), cp) != set.end();
  };
  if (left)
    while (b < e && strippable(b)) ++b;
  if (right)
    while (e > b && strippable(e - 1)) --e;
  return s.substr(offs[b], offs[e] - offs[b]);
}

std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        std::string rest = s.substr(i);
        while (!rest.empty() && is_space(rest.back())) rest.pop_back();
        out.push_back(rest);
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  if (sep->empty()) fail("str.split: empty separator");
  size_t i = 0;
  while (true) {
    size_t j = (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) ? std::string::npos : s.find(*sep, i);
    if (j == std::string::npos) {
      out.push_back(s.substr(i));
      return out;
    }
    out.push_back(s.substr(i, j - i));
    i = j + sep->size();
  }
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (from.empty()) {
    auto offs = code_point_offsets(s);
    for (size_t k = 0; k + 1 < offs.size(); ++k) {
      if (count < 0 || done < count) out += to, ++done;
      out += s.substr(offs[k], offs[k + 1] - offs[k]);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t i = 0;
  while (true) {
    size_t j = (count >= 0 && done >= count) ? std::string::npos : s.find(from, i);
    if (j == std::string::npos) break;
    out += s.substr(i, j - i) + to;
    i = j + from.size();
    ++done;
  }
  return out + s.substr(i);
}

std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return s;
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 32);
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool prev_letter = false;
  for (char& c : out) {
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) c = prev_letter ? static_cast<char>(lower(std::string(1, c))[0]) : static_cast<char>(upper(std::string(1, c))[0]);
    prev_letter = letter || (static_cast<unsigned char>(c) >= 0x80);
  }
  return out;
}

std::vector<size_t> slice_indices(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                                  std::optional<int64_t> step) {
  int64_t st = step.value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  auto adjust = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t b = adjust(start, st < 0 ? n - 1 : 0), e = adjust(stop, st < 0 ? -1 : n);
  std::vector<size_t> idx;
  if (st > 0)
    for (int64_t i = b; i < e; i += st) idx.push_back(static_cast<size_t>(i));
  else
    for (int64_t i = b; i > e; i += st) idx.push_back(static_cast<size_t>(i));
  return idx;
}

}  // namespace tritium::tmpl::pystr
