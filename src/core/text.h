// Text taken from an input (a file's header, a pickle, a config) made fit for a message.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace ms {

// s with every byte that is not printable ASCII or part of a well-formed UTF-8 character written as \xNN (and
// '\\' as "\\\\"), cut to at most `max` bytes of s with "..." after: a hostile file cannot put raw bytes, control
// sequences or invalid UTF-8 into a message. Characters that reorder or hide text (bidirectional controls,
// zero-width marks) are escaped byte by byte too.
std::string escape_text(std::string_view s, size_t max = 200);

// escape_text in single quotes: 'name'.
std::string quote_text(std::string_view s, size_t max = 200);

}  // namespace ms
