#include "core/text.h"

#include <cstdint>

namespace ms {

namespace {

// The length of the well-formed UTF-8 character at s[i] (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF), or 0 when the bytes there are not one; C0 and C1 controls count as not printable.
size_t utf8_char(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return i + k < s.size() ? uint8_t(s[i + k]) : uint8_t(0); };
  const uint8_t c = b(0);
  if (c >= 0x20 && c < 0x7f) return 1;
  const auto cont = [&](size_t k, uint8_t lo = 0x80, uint8_t hi = 0xbf) { return b(k) >= lo && b(k) <= hi; };
  if (c >= 0xc2 && c <= 0xdf) return cont(1) && !(c == 0xc2 && b(1) < 0xa0) ? 2 : 0;  // U+0080..9F are C1 controls
  if (c == 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;  // not the surrogates D800..DFFF
  if (c == 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

// Whether the 3-byte character at s[i] is one that reorders or hides text on a terminal: zero-width marks
// U+200B..200F, line and paragraph separators and bidirectional embeddings U+2028..202E, bidirectional isolates
// U+2066..2069, and the byte-order mark U+FEFF.
bool invisible(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return uint8_t(s[i + k]); };
  return (b(0) == 0xe2 && b(1) == 0x80 && ((b(2) >= 0x8b && b(2) <= 0x8f) || (b(2) >= 0xa8 && b(2) <= 0xae))) ||
         (b(0) == 0xe2 && b(1) == 0x81 && b(2) >= 0xa6 && b(2) <= 0xa9) ||
         (b(0) == 0xef && b(1) == 0xbb && b(2) == 0xbf);
}

}  // namespace

std::string escape_text(std::string_view s, size_t max) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  size_t i = 0;
  while (i < s.size() && i < max) {
    const size_t n = utf8_char(s, i);
    if (n > 0 && s[i] != '\\' && !(n == 3 && invisible(s, i))) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    if (s[i] == '\\') {
      out += "\\\\";
    } else {
      const uint8_t c = uint8_t(s[i]);
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
    ++i;
  }
  if (i < s.size()) out += "...";
  return out;
}

std::string quote_text(std::string_view s, size_t max) {
  std::string out(1, '\'');
  out += escape_text(s, max);
  out += '\'';
  return out;
}

}  // namespace ms
