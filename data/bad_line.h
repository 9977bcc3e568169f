// How a bad line of input is reported: its place as FILE:LINE (1-based,
// the header counted) and the line itself, quoted and cut to 200
// characters, so that the user sees what pstrain saw. Pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

namespace pstrain::worker {

inline constexpr size_t kQuotedLineChars = 200;

// `text` in double quotes, cut after kQuotedLineChars characters (UTF-8
// sequences kept whole; "..." marks a cut), with tabs, line breaks, other
// control bytes, quotes, backslashes and invalid UTF-8 escaped (\t, \x01).
std::string QuoteLine(std::string_view text);

// "WHERE: REASON; the line: \"QUOTE\"" (no quote for an empty text, e.g. an
// overlong line that was never buffered).
std::string BadLineMessage(absl::string_view where, absl::string_view reason,
                           std::string_view text);

}  // namespace pstrain::worker
