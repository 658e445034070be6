// UTF-8 validity as RFC 3629 defines it (no overlong forms, no surrogates, nothing above
// U+10FFFF), and character counts: what a corpus reader needs to refuse mis-encoded text before
// it is tokenized into byte soup.
#pragma once

#include <cstddef>
#include <string_view>

namespace zaya {

// The offset of the first byte that does not start a valid sequence; npos when all is valid.
size_t first_invalid_utf8(std::string_view text);

// Code points in valid UTF-8 text (the count of bytes that are not continuation bytes).
size_t utf8_length(std::string_view text);

}  // namespace zaya
