// Wan's prompt tokenisation: the umT5 spiece.model (run by t5/spm_model.h), Wan's cleaning (t5/clean_text.h), EOS
// appended, truncated to text_len; where Wan's Hugging Face fast tokenizer differs from raw sentencepiece, Wan's
// rule is followed (docs/text_encoder.md states each rule and where it comes from).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ms {

class SpmModel;

class T5Tokenizer {
 public:
  // Loads a sentencepiece ModelProto; throws ms::Error naming path when it is missing, not such a model, or has no EOS.
  static T5Tokenizer load(const std::string& path);

  T5Tokenizer(T5Tokenizer&&) noexcept;
  T5Tokenizer& operator=(T5Tokenizer&&) noexcept;
  ~T5Tokenizer();

  // The ids of one prompt (UTF-8) as Wan feeds them to the encoder, without padding: the cleaned text's pieces (special
  // tokens typed in it as their ids), the first text_len - 1 kept, then EOS; an empty prompt gives [EOS]. Throws
  // ms::Error for text that is not UTF-8.
  std::vector<int64_t> encode(std::string_view prompt, int64_t text_len) const;

  int64_t size() const;        // pieces in the model
  bool byte_fallback() const;  // the model has <0xXX> byte pieces (never emitted: Wan's tokenizer gives <unk>)
  const std::string& path() const;

 private:
  T5Tokenizer() = default;

  std::unique_ptr<SpmModel> spm_;
  std::string path_;
  int space_ = -1;                                     // the lone "\u2581" piece, -1 if the model has none
  std::vector<std::pair<std::string, int>> specials_;  // surface -> id
};

}  // namespace ms
