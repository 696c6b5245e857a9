// A sentencepiece unigram model (umT5's spiece.model) read and run without the sentencepiece library: Debian's build
// of that library carries its own protobuf 3.14 with exported symbols, which clash with the libprotobuf 3.21 that
// OpenCV pulls into the same process (a crash at start-up), so the ModelProto is read here with a bounds-checked
// protobuf wire walker and encoded as sentencepiece's normalizer.cc and unigram_model.cc (EncodeOptimized) do. The
// committed fixtures check every id against Debian's spm_encode (tests/data/t5/, docs/text_encoder.md).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ms {

class SpmModel {
 public:
  enum class PieceType { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

  // Reads a ModelProto; throws ms::Error naming path when it is missing, is not a sentencepiece model, or is one this
  // reader cannot run (not unigram, whitespace as suffix, no <unk>).
  static SpmModel load(const std::string& path);
  // The same from the file's bytes; path names it in messages.
  static SpmModel parse(std::string_view data, const std::string& path);

  // The ids of text (valid UTF-8): normalized (the precompiled charsmap, user-defined pieces kept, a dummy prefix,
  // extra whitespace removed, spaces as U+2581), then the best-scoring segmentation into pieces; characters without
  // a piece become <unk>, one per run (as sentencepiece without byte fallback emits them).
  std::vector<int> encode(std::string_view text) const;

  // The normalized form encode() segments (for tests and messages).
  std::string normalize(std::string_view text) const;

  int size() const { return int(pieces_.size()); }
  const std::string& piece(int id) const { return pieces_[size_t(id)].piece; }
  PieceType type(int id) const { return pieces_[size_t(id)].type; }
  int id_of(std::string_view piece) const;  // -1 when absent
  int unk_id() const { return unk_; }
  int eos_id() const { return eos_; }  // -1 when the model has no EOS control piece
  bool has_byte_pieces() const { return has_bytes_; }

 private:
  struct Piece {
    std::string piece;
    float score = 0;
    PieceType type = PieceType::normal;
  };

  // The longest normalization rule at the start of s: (replacement, bytes consumed).
  std::pair<std::string_view, size_t> normalize_prefix(std::string_view s) const;

  std::string path_;
  std::vector<Piece> pieces_;
  std::unordered_map<std::string_view, int> trie_;  // normal, user-defined and unused pieces -> id (views into pieces_)
  std::unordered_map<std::string_view, int> all_;   // every piece -> id
  std::vector<std::string_view> user_defined_;
  size_t max_piece_bytes_ = 0;
  float min_score_ = 0, max_score_ = 0;
  int unk_ = -1, eos_ = -1;
  bool has_bytes_ = false;
  bool add_dummy_prefix_ = true, remove_extra_whitespaces_ = true, escape_whitespaces_ = true;
  std::vector<uint32_t> charsmap_trie_;  // darts-clone double array units
  std::string charsmap_strings_;         // NUL-terminated replacements the trie's values point into
};

}  // namespace ms
