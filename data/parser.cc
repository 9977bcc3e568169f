#include "data/parser.h"

#include "data/delimited_parser.h"

namespace pstrain::worker {

absl::StatusOr<std::unique_ptr<const Parser>> CreateParser(const Schema& schema) {
  absl::StatusOr<DelimitedParser> parser = DelimitedParser::Create(schema);
  if (!parser.ok()) return parser.status();
  return std::make_unique<const DelimitedParser>(*std::move(parser));
}

}  // namespace pstrain::worker
