// Wan's prompt cleaning (HuggingfaceTokenizer._clean with clean="whitespace" in Wan's wan/modules/tokenizers.py),
// less its first step, ftfy.fix_text (docs/text_encoder.md lists what that would also change).
#pragma once
#include <string>
#include <string_view>

namespace ms {

// Python's html.unescape on UTF-8 text: named references of the HTML5 table (the legacy ones also without ';', the
// longest known prefix of an unknown name), decimal and hex numeric references with HTML5's fix-ups. Throws ms::Error
// when text is not valid UTF-8.
std::string html_unescape(std::string_view text);

// Whether text is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF, as Python decodes it).
bool valid_utf8(std::string_view text);

// html_unescape twice, Python's str.strip, every run of Unicode White_Space replaced by one space, str.strip again.
std::string clean_prompt(std::string_view text);

}  // namespace ms
