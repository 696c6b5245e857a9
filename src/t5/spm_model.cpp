#include "t5/spm_model.h"

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <filesystem>

#include "core/check.h"
#include "core/text.h"
#include "io/atomic_file.h"

namespace ms {
namespace {

constexpr float kUnkPenalty = 10.0f;  // unigram_model.cc: an unknown character scores min_score - 10
constexpr std::string_view kSpaceSymbol = "\xe2\x96\x81";  // U+2581

// Protobuf wire format, read with every length checked against the bytes that are there.
class Wire {
 public:
  Wire(std::string_view buf, const std::string& path) : buf_(buf), path_(path) {}
  bool done() const { return pos_ >= buf_.size(); }

  // The next field: its number, wire type, and (for lengths) its bytes or (for varints and fixed32) its value.
  void next(uint32_t* field, uint32_t* wire, uint64_t* value, std::string_view* bytes) {
    const uint64_t key = varint();
    *field = uint32_t(key >> 3), *wire = uint32_t(key & 7);
    if (*field == 0) fail("a field numbered 0");
    switch (*wire) {
      case 0:
        *value = varint();
        break;
      case 1:
        skip(8);
        break;
      case 2: {
        const uint64_t n = varint();
        if (n > buf_.size() - pos_) fail("a length past the end of the data");
        *bytes = buf_.substr(pos_, size_t(n));
        pos_ += size_t(n);
        break;
      }
      case 5: {
        if (buf_.size() - pos_ < 4) fail("a value past the end of the data");
        uint32_t v;
        std::memcpy(&v, buf_.data() + pos_, 4);
        *value = v;
        pos_ += 4;
        break;
      }
      default:
        fail(cat("wire type ", *wire));
    }
  }

 private:
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= buf_.size()) fail("a number cut off by the end of the data");
      const auto b = uint8_t(buf_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (b < 0x80) return v;
    }
    fail("a number longer than 10 bytes");
  }
  void skip(size_t n) {
    if (buf_.size() - pos_ < n) fail("a value past the end of the data");
    pos_ += n;
  }
  [[noreturn]] void fail(const std::string& what) const {
    MS_FAIL("tokenizer ", quote_text(path_), " is not a sentencepiece model (", what, " at byte ", pos_,
            "); pass umT5's spiece.model");
  }

  std::string_view buf_;
  size_t pos_ = 0;
  const std::string& path_;
};

size_t utf8_len(char c) {
  const auto b = uint8_t(c);
  return b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
}

}  // namespace

SpmModel SpmModel::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    MS_FAIL("tokenizer ", quote_text(path),
            " is not a file; pass umT5's spiece.model (google/umt5-xxl, also in "
            "Wan's google/umt5-xxl/ folder) with --tokenizer");
  return parse(read_file(path), path);
}

SpmModel SpmModel::parse(std::string_view data, const std::string& path) {
  SpmModel m;
  m.path_ = path;
  std::string eos_piece = "</s>", charsmap;
  uint64_t model_type = 1;
  bool suffix = false;
  uint32_t field, wire;
  uint64_t value = 0;
  std::string_view bytes;
  for (Wire w(data, path); !w.done();) {
    w.next(&field, &wire, &value, &bytes);
    if (field == 1 && wire == 2) {  // ModelProto.pieces
      Piece p;
      for (Wire s(bytes, path); !s.done();) {
        std::string_view b;
        uint64_t v = 0;
        s.next(&field, &wire, &v, &b);
        if (field == 1 && wire == 2) p.piece = std::string(b);
        if (field == 2 && wire == 5) {
          const auto bits = uint32_t(v);
          std::memcpy(&p.score, &bits, 4);
        }
        if (field == 3 && wire == 0) {
          if (v < 1 || v > 6) MS_FAIL("tokenizer ", quote_text(path), ": piece ", m.pieces_.size(), " has type ", v);
          p.type = PieceType(v);
        }
      }
      if (p.piece.empty()) MS_FAIL("tokenizer ", quote_text(path), ": piece ", m.pieces_.size(), " is empty");
      m.pieces_.push_back(std::move(p));
    } else if (field == 2 && wire == 2) {  // TrainerSpec
      for (Wire s(bytes, path); !s.done();) {
        std::string_view b;
        uint64_t v = 0;
        s.next(&field, &wire, &v, &b);
        if (field == 3 && wire == 0) model_type = v;
        if (field == 24 && wire == 0) suffix = v != 0;
        if (field == 47 && wire == 2) eos_piece = std::string(b);
      }
    } else if (field == 3 && wire == 2) {  // NormalizerSpec
      for (Wire s(bytes, path); !s.done();) {
        std::string_view b;
        uint64_t v = 0;
        s.next(&field, &wire, &v, &b);
        if (field == 2 && wire == 2) charsmap = std::string(b);
        if (field == 3 && wire == 0) m.add_dummy_prefix_ = v != 0;
        if (field == 4 && wire == 0) m.remove_extra_whitespaces_ = v != 0;
        if (field == 5 && wire == 0) m.escape_whitespaces_ = v != 0;
      }
    }
  }
  auto refuse = [&](const std::string& why) {
    MS_FAIL("tokenizer ", quote_text(path), " ", why, "; pass umT5's spiece.model");
  };
  if (m.pieces_.empty()) refuse("is not a sentencepiece model (it holds no pieces)");
  if (model_type != 1) refuse(cat("is a sentencepiece model of type ", model_type, ", not unigram (umT5's is)"));
  if (suffix) refuse("treats whitespace as a suffix, which umT5's model does not");

  m.min_score_ = FLT_MAX, m.max_score_ = FLT_MIN;  // as unigram_model.cc (FLT_MIN: the smallest positive float)
  for (int i = 0; i < m.size(); ++i) {
    const Piece& p = m.pieces_[size_t(i)];
    if (!m.all_.emplace(p.piece, i).second)
      MS_FAIL("tokenizer ", quote_text(path), ": the piece ", quote_text(p.piece), " is defined twice");
    if (p.type == PieceType::normal || p.type == PieceType::user_defined || p.type == PieceType::unused) {
      m.trie_.emplace(p.piece, i);
      m.max_piece_bytes_ = std::max(m.max_piece_bytes_, p.piece.size());
    }
    if (p.type == PieceType::normal)
      m.min_score_ = std::min(m.min_score_, p.score), m.max_score_ = std::max(m.max_score_, p.score);
    if (p.type == PieceType::user_defined) m.user_defined_.push_back(p.piece);
    if (p.type == PieceType::byte) m.has_bytes_ = true;
    if (p.type == PieceType::unknown) {
      if (m.unk_ >= 0) refuse("has two <unk> pieces");
      m.unk_ = i;
    }
  }
  if (m.unk_ < 0) refuse("has no <unk> piece");
  const int eos = m.id_of(eos_piece);
  m.eos_ = eos >= 0 && m.type(eos) == PieceType::control ? eos : -1;

  if (!charsmap.empty()) {  // <trie bytes: uint32 LE><double-array units><NUL-terminated replacements>
    uint32_t trie_bytes = 0;
    if (charsmap.size() > 4) std::memcpy(&trie_bytes, charsmap.data(), 4);
    if (charsmap.size() <= 4 || trie_bytes % 4 || trie_bytes >= charsmap.size() - 4)
      refuse("has a broken normalization table");
    m.charsmap_trie_.resize(trie_bytes / 4);
    if (trie_bytes) std::memcpy(m.charsmap_trie_.data(), charsmap.data() + 4, trie_bytes);
    m.charsmap_strings_ = charsmap.substr(4 + trie_bytes);
  }
  return m;
}

int SpmModel::id_of(std::string_view piece) const {
  auto it = all_.find(piece);
  return it == all_.end() ? -1 : it->second;
}

// normalizer.cc's NormalizePrefix: a user-defined piece is kept as it is; else the longest rule of the precompiled
// charsmap (a darts-clone double array: common-prefix search over the bytes); else one UTF-8 character unchanged.
std::pair<std::string_view, size_t> SpmModel::normalize_prefix(std::string_view s) const {
  size_t longest_user = 0;
  for (std::string_view u : user_defined_)
    if (s.starts_with(u)) longest_user = std::max(longest_user, u.size());
  if (longest_user) return {s.substr(0, longest_user), longest_user};
  size_t best_len = 0;
  uint32_t best_value = 0;
  if (!charsmap_trie_.empty()) {
    const auto& a = charsmap_trie_;
    auto offset = [](uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); };
    size_t node = offset(a[0]);
    for (size_t i = 0; i < s.size(); ++i) {
      node ^= uint8_t(s[i]);
      if (node >= a.size()) break;
      const uint32_t unit = a[node];
      if ((unit & ((1u << 31) | 0xFF)) != uint8_t(s[i])) break;  // label
      node ^= offset(unit);
      if (node >= a.size()) break;
      if ((unit >> 8) & 1) best_len = i + 1, best_value = a[node] & ((1u << 31) - 1);  // has leaf: the value
    }
  }
  if (best_len && best_value < charsmap_strings_.size()) {
    const char* r = charsmap_strings_.data() + best_value;
    const size_t n = strnlen(r, charsmap_strings_.size() - best_value);
    return {std::string_view(r, n), best_len};
  }
  const size_t n = std::min(utf8_len(s[0]), s.size());
  return {s.substr(0, n), n};
}

std::string SpmModel::normalize(std::string_view input) const {
  std::string out;
  if (remove_extra_whitespaces_)  // leading characters that normalize to one space
    while (!input.empty()) {
      const auto [r, n] = normalize_prefix(input);
      if (r != " ") break;
      input.remove_prefix(n);
    }
  if (input.empty()) return out;
  const std::string_view space = escape_whitespaces_ ? kSpaceSymbol : " ";
  if (add_dummy_prefix_) out.append(space.data(), space.size());
  bool prev_space = remove_extra_whitespaces_;
  while (!input.empty()) {
    auto [r, n] = normalize_prefix(input);
    while (prev_space && r.starts_with(' ')) r.remove_prefix(1);
    if (!r.empty()) {
      for (char c : r) {
        if (c == ' ')
          out.append(space.data(), space.size());
        else
          out.push_back(c);
      }
      prev_space = r.ends_with(' ');
    }
    input.remove_prefix(n);
    if (!remove_extra_whitespaces_) prev_space = false;
  }
  if (remove_extra_whitespaces_)
    while (out.ends_with(space)) out.erase(out.size() - space.size());
  return out;
}

// unigram_model.cc's EncodeOptimized: the best path ending at each byte position, pieces found by prefix lookups,
// an unknown character scored min_score - 10 where no one-character piece starts; then runs of <unk> merged.
std::vector<int> SpmModel::encode(std::string_view text) const {
  const std::string s = normalize(text);
  const size_t n = s.size();
  struct Best {
    int id = -1;
    float score = 0;
    int64_t start = -1;
  };
  std::vector<Best> best(n + 1);
  const float unk_score = min_score_ - kUnkPenalty;
  for (size_t start = 0; start < n;) {
    const float here = best[start].score;
    const size_t one = std::min(utf8_len(s[start]), n - start);
    bool single = false;
    for (size_t len = 1; len <= std::min(max_piece_bytes_, n - start); ++len) {
      auto it = trie_.find(std::string_view(s).substr(start, len));
      if (it == trie_.end() || type(it->second) == PieceType::unused) continue;
      const float score = type(it->second) == PieceType::user_defined ? float(len) * max_score_ - 0.1f
                                                                      : pieces_[size_t(it->second)].score;
      Best& t = best[start + len];
      if (t.start == -1 || score + here > t.score) t = {it->second, score + here, int64_t(start)};
      single |= len == one;
    }
    if (!single) {
      Best& t = best[start + one];
      if (t.start == -1 || unk_score + here > t.score) t = {unk_, unk_score + here, int64_t(start)};
    }
    start += one;
  }
  std::vector<int> ids;
  for (size_t end = n; end > 0; end = size_t(best[end].start)) ids.push_back(best[end].id);
  std::reverse(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end(), [&](int a, int b) { return a == unk_ && b == unk_; }), ids.end());
  return ids;
}

}  // namespace ms
