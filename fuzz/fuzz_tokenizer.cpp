// libFuzzer target: the tokenizer's two readers of untrusted bytes. An input whose first byte is even is a
// sentencepiece model file (SpmModel::parse, then an encode of a fixed prompt with it); odd, the rest is a prompt
// (Wan's cleaning and Python's html.unescape, which must take any bytes). Every input must either work or throw
// ms::Error.
#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "t5/clean_text.h"
#include "t5/spm_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      const ms::SpmModel m = ms::SpmModel::parse(rest, "fuzz.model");
      m.encode("caf\xc3\xa9 the red cat \xef\xbc\xa1 \xe2\x96\x81 x");
    } else {
      ms::clean_prompt(rest);
    }
  } catch (const ms::Error&) {
  }
  return 0;
}
