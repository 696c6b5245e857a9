#include "t5/text_encoder.h"

#include "backend/cpu/t5_encoder.h"
#include "core/check.h"
#include "core/text.h"
#include "io/atomic_file.h"
#include "t5/clean_text.h"

namespace ms {

TextEncoder::TextEncoder(const std::string& t5_path, const std::string& tokenizer_path, const std::string& config_path)
    : tokenizer_(T5Tokenizer::load(tokenizer_path)),
      weights_(T5Weights::load(t5_path, config_path)),
      forward_(cpu_t5_forward()) {
  if (tokenizer_.size() > config().vocab)
    MS_FAIL("tokenizer ", quote_text(tokenizer_path), " has ", tokenizer_.size(), " pieces but the text encoder ",
            quote_text(t5_path), " embeds only ", config().vocab,
            " tokens; the two do not belong together (umT5-XXL: 256384 rows for umT5's spiece.model)");
}

EncodedPrompt TextEncoder::encode(std::string_view prompt) const {
  EncodedPrompt e;
  e.ids = tokenizer_.encode(prompt, config().text_len);
  e.context = forward_->encode(weights_, e.ids);
  return e;
}

std::vector<std::string> read_prompt_lines(const std::string& path) {
  const std::string text = read_file(path);
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (lines.empty()) MS_FAIL("prompts file ", quote_text(path), " holds no prompt; write one prompt per line");
  for (size_t i = 0; i < lines.size(); ++i)
    if (!valid_utf8(lines[i]))
      MS_FAIL("prompts file ", quote_text(path), ": line ", i + 1, " is not valid UTF-8; save the file as UTF-8");
  return lines;
}

}  // namespace ms
