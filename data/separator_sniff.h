// Separator sniffing: when a line does not split into the columns the
// layout expects, which separator the file seems to use instead, and what
// to set so that pstrain reads it (a schema's "separator", or --field_sep
// in the Criteo layout). Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "data/schema.h"

namespace pstrain::worker {

// The separator `line` seems to use when `sep` splits it into a number of
// columns other than `want`: a tab, comma, semicolon or pipe (or a space,
// only when it gives exactly `want`) that splits it into `want` columns;
// else, when `sep` gives one column, the candidate that gives the most (at
// least 2). 0 when none fits. Quoted columns count as one.
char SniffSeparator(std::string_view line, char sep, size_t want);

// A separator as messages print it: '\t', ';'.
std::string SeparatorName(char sep);

// What to set for `sep`: `set "separator": "semicolon" in the schema` (a
// schema file), or `--field_sep=';', or describe the columns with --schema`
// (the Criteo layout).
std::string SeparatorAdvice(const Schema& schema, char sep);

// Why a line of `fields` columns does not fit `schema`, with the sniffed
// separator when there is one, e.g.
//   1 field, the schema expects 4; the file seems to be separated by ';'
//   (set "separator": "semicolon" in the schema)
std::string ColumnCountReason(const Schema& schema, std::string_view line, size_t fields);

}  // namespace pstrain::worker
