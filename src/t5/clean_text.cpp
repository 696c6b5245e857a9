#include "t5/clean_text.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "core/check.h"

namespace ms {
namespace {

struct HtmlEntity {
  std::string_view name, value;
};
struct CharrefFix {
  uint32_t num;
  std::string_view value;
};
#include "t5/html_entities.inc"

// UTF-8 <-> code points. Decoding is strict (no overlongs, surrogates or values past U+10FFFF), as Python's is.
std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = uint8_t(s[i]);
    const int n = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + size_t(n) > s.size())
      MS_FAIL("the text is not valid UTF-8 (byte ", i, " of ", s.size(), "); save the prompts as UTF-8");
    uint32_t c = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto t = uint8_t(s[i + size_t(k)]);
      if ((t & 0xC0) != 0x80)
        MS_FAIL("the text is not valid UTF-8 (byte ", i + size_t(k), "); save the prompts as UTF-8");
      c = c << 6 | (t & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kMin[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
      MS_FAIL("the text is not valid UTF-8 (byte ", i, ": an overlong form or a surrogate); save the prompts as UTF-8");
    out.push_back(c);
    i += size_t(n);
  }
  return out;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | c >> 6), out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | c >> 12), out += char(0x80 | (c >> 6 & 0x3F)), out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | c >> 18), out += char(0x80 | (c >> 12 & 0x3F)), out += char(0x80 | (c >> 6 & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

const HtmlEntity* find_entity(std::string_view name) {
  auto it = std::lower_bound(std::begin(kHtmlEntities), std::end(kHtmlEntities), name,
                             [](const HtmlEntity& e, std::string_view n) { return e.name < n; });
  return it != std::end(kHtmlEntities) && it->name == name ? it : nullptr;
}

bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool is_hex(char32_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// The reference that starts at s[i] == '&' (Python's pattern &(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)):
// appends its replacement to out and returns the index after it, or returns i when nothing matches there.
size_t replace_charref(const std::u32string& s, size_t i, std::string& out) {
  size_t j = i + 1;
  if (j < s.size() && s[j] == '#') {
    const bool hex = j + 1 < s.size() && (s[j + 1] == 'x' || s[j + 1] == 'X');
    const size_t d0 = j + 1 + (hex ? 1 : 0);
    size_t d = d0;
    while (d < s.size() && (hex ? is_hex(s[d]) : is_digit(s[d]))) ++d;
    if (d == d0) return i;
    uint64_t num = 0;  // saturates: anything past U+10FFFF is U+FFFD
    for (size_t k = d0; k < d; ++k) {
      const uint32_t v = is_digit(s[k]) ? s[k] - '0' : (s[k] | 0x20) - 'a' + 10;
      num = std::min<uint64_t>(num * (hex ? 16 : 10) + v, 0x7FFFFFFF);
    }
    const size_t end = d < s.size() && s[d] == ';' ? d + 1 : d;
    for (const auto& f : kCharrefFixes)
      if (f.num == num) return out += f.value, end;
    if ((num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF) return append_utf8(out, 0xFFFD), end;
    if (std::find(std::begin(kDroppedCodepoints), std::end(kDroppedCodepoints), num) != std::end(kDroppedCodepoints))
      return end;
    append_utf8(out, uint32_t(num));
    return end;
  }
  auto name_char = [](char32_t c) {
    return c != '\t' && c != '\n' && c != '\f' && c != ' ' && c != '<' && c != '&' && c != '#' && c != ';';
  };
  size_t e = j;
  while (e < s.size() && e - j < 32 && name_char(s[e])) ++e;
  if (e == j) return i;
  if (e < s.size() && s[e] == ';') ++e;
  const std::u32string name(s, j, e - j);
  if (const HtmlEntity* h = find_entity(encode_utf8(name))) return out += h->value, e;
  for (size_t x = name.size() - 1; x > 1; --x)  // the longest known prefix (only the legacy names lack ';')
    if (const HtmlEntity* h = find_entity(encode_utf8(name.substr(0, x)))) {
      out += h->value;
      out += encode_utf8(name.substr(x));
      return e;
    }
  out += '&';
  out += encode_utf8(name);
  return e;
}

// Unicode White_Space, what Wan's regex \s collapses; Python's str.isspace (strip) also takes U+001C..U+001F.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
bool is_py_space(char32_t c) { return is_white_space(c) || (c >= 0x1C && c <= 0x1F); }

std::u32string strip(const std::u32string& s) {
  size_t a = 0, b = s.size();
  while (a < b && is_py_space(s[a])) ++a;
  while (b > a && is_py_space(s[b - 1])) --b;
  return s.substr(a, b - a);
}

}  // namespace

bool valid_utf8(std::string_view text) {
  try {
    decode_utf8(text);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string html_unescape(std::string_view text) {
  const std::u32string s = decode_utf8(text);
  if (s.find(U'&') == std::u32string::npos) return std::string(text);
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t next = s[i] == '&' ? replace_charref(s, i, out) : i;
    if (next == i)
      append_utf8(out, s[i++]);
    else
      i = next;
  }
  return out;
}

std::string clean_prompt(std::string_view text) {
  const std::u32string s = strip(decode_utf8(html_unescape(html_unescape(text))));
  std::u32string collapsed;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!is_white_space(s[i])) {
      collapsed += s[i];
    } else if (i == 0 || !is_white_space(s[i - 1])) {  // the first of a run
      collapsed += U' ';
    }
  }
  return encode_utf8(strip(collapsed));
}

}  // namespace ms
