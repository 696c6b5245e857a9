// Prompts to Wan's text embeddings: the umT5 tokenizer and encoder together, as `megaslide text-encode`, `sample
// --t5`, `train --t5` and `cache --t5` use them (DESIGN §9, docs/text_encoder.md).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "t5/t5_tokenizer.h"
#include "t5/t5_weights.h"

namespace ms {

struct EncodedPrompt {
  std::vector<int64_t> ids;    // [L] token ids, EOS last
  std::vector<float> context;  // [L, dim] the encoder's output rows
};

class TextEncoder {
 public:
  // Loads both and checks that they belong together (the tokenizer's pieces fit the encoder's vocabulary).
  TextEncoder(const std::string& t5_path, const std::string& tokenizer_path, const std::string& config_path);

  EncodedPrompt encode(std::string_view prompt) const;

  const T5Config& config() const { return weights_.config(); }
  const T5Weights& weights() const { return weights_; }
  const T5Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  T5Tokenizer tokenizer_;
  T5Weights weights_;
};

// The prompts of a --prompts file: UTF-8 split on '\n' only (not '\r' or Unicode line separators); a final '\n'
// does not start another prompt; every other line, even an empty one, is a prompt. Throws ms::Error naming the
// file when it cannot be read, is not UTF-8 (naming the line) or holds no prompt.
std::vector<std::string> read_prompt_lines(const std::string& path);

}  // namespace ms
