#include "t5/t5_tokenizer.h"

#include "core/check.h"
#include "core/text.h"
#include "t5/clean_text.h"
#include "t5/spm_model.h"

namespace ms {
namespace {

constexpr int kUmt5Pieces = 256000, kUmt5Sentinels = 300;

}  // namespace

T5Tokenizer::T5Tokenizer(T5Tokenizer&&) noexcept = default;
T5Tokenizer& T5Tokenizer::operator=(T5Tokenizer&&) noexcept = default;
T5Tokenizer::~T5Tokenizer() = default;

T5Tokenizer T5Tokenizer::load(const std::string& path) {
  T5Tokenizer t;
  t.path_ = path;
  t.spm_ = std::make_unique<SpmModel>(SpmModel::load(path));
  const SpmModel& m = *t.spm_;
  if (m.eos_id() < 0)
    MS_FAIL("tokenizer ", quote_text(path), " has no EOS control piece '</s>'; umT5's spiece.model has one");
  // The special tokens of Wan's tokenizer: the model's control and unknown pieces ("<pad>", "</s>", "<unk>", "<s>")
  // and, for umT5's 256,000-piece model, the 300 sentinels <extra_id_N> that the tokenizer appends as ids
  // 256299 - N.
  for (int i = 0; i < m.size(); ++i)
    if (m.type(i) == SpmModel::PieceType::control || m.type(i) == SpmModel::PieceType::unknown)
      t.specials_.push_back({m.piece(i), i});
  if (m.size() == kUmt5Pieces)
    for (int n = 0; n < kUmt5Sentinels; ++n)
      t.specials_.push_back({cat("<extra_id_", n, ">"), kUmt5Pieces + kUmt5Sentinels - 1 - n});
  t.space_ = m.id_of("\u2581");
  return t;
}

int64_t T5Tokenizer::size() const { return spm_->size(); }
bool T5Tokenizer::byte_fallback() const { return spm_->has_byte_pieces(); }
const std::string& T5Tokenizer::path() const { return path_; }

std::vector<int64_t> T5Tokenizer::encode(std::string_view prompt, int64_t text_len) const {
  MS_CHECK(text_len >= 1, "text_len ", text_len);
  const std::string text = clean_prompt(prompt);
  std::vector<int64_t> ids;
  // Wan's fast tokenizer splits the text on its special tokens first (exact, case-sensitive matches) and tokenizes
  // each stretch between them on its own; a stretch that ends in a space before a special token keeps that space as
  // a lone "\u2581" piece.
  size_t start = 0;
  while (start <= text.size()) {
    size_t at = text.size(), len = 0;
    int64_t special = -1;
    for (const auto& [surface, id] : specials_) {
      const size_t p = text.find(surface, start);
      if (p < at || (p == at && p != std::string::npos && surface.size() > len))
        at = p, len = surface.size(), special = id;
    }
    const std::string_view stretch = std::string_view(text).substr(start, at - start);
    for (int id : spm_->encode(stretch)) ids.push_back(id);
    if (special < 0) break;
    if (stretch.ends_with(' ') && space_ >= 0) ids.push_back(space_);
    ids.push_back(special);
    start = at + len;
  }
  if (int64_t(ids.size()) > text_len - 1) ids.resize(size_t(text_len - 1));
  ids.push_back(spm_->eos_id());
  return ids;
}

}  // namespace ms
