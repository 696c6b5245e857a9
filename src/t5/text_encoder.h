// Prompts to Wan's text embeddings: the umT5 tokenizer and encoder together, as `megaslide text-encode`, `sample
// --t5`, `train --t5` and `cache --t5` use them (docs/text_encoder.md).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/t5_weights.h"
#include "runtime/t5_forward.h"
#include "t5/t5_tokenizer.h"

namespace ms {

// Wan's default negative prompt (wan/configs/shared_config.py, sample_neg_prompt), used by its generate.py when none
// is given.
inline constexpr const char* kWanNegativePrompt =
    "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，低质量，JPEG压缩残留，"
    "丑陋的，残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，毁容的，形态畸形的肢体，手指融合，"
    "静止不动的画面，杂乱的背景，三条腿，背景人很多，倒着走";

struct EncodedPrompt {
  std::vector<int64_t> ids;    // [L] token ids, EOS last
  std::vector<float> context;  // [L, dim] the encoder's output rows
};

class TextEncoder {
 public:
  // Loads both and checks that they belong together (the tokenizer's pieces fit the encoder's vocabulary). Encodes
  // on the CPU until set_forward gives it another backend's forward.
  TextEncoder(const std::string& t5_path, const std::string& tokenizer_path, const std::string& config_path);

  EncodedPrompt encode(std::string_view prompt) const;
  void set_forward(std::unique_ptr<T5Forward> forward) { forward_ = std::move(forward); }

  const T5Config& config() const { return weights_.config(); }
  const T5Weights& weights() const { return weights_; }
  const T5Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  T5Tokenizer tokenizer_;
  T5Weights weights_;
  std::unique_ptr<T5Forward> forward_;  // runtime/t5_forward.h
};

// The prompts of a --prompts file: UTF-8 split on '\n' only (not '\r' or Unicode line separators); a final '\n'
// does not start another prompt; every other line, even an empty one, is a prompt. Throws ms::Error naming the
// file when it cannot be read, is not UTF-8 (naming the line) or holds no prompt.
std::vector<std::string> read_prompt_lines(const std::string& path);

}  // namespace ms
