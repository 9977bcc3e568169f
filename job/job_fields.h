// The fields of a job: every setting a job file may hold, each with its
// place in the file (a dotted path, "train.batch_size") and the one flag it
// stands for (--batch_size). One field, one flag: a flag given on a command
// line overrides the file's field of the same name. The table is the only
// place that maps the two; the flags keep their defaults and help where they
// are defined (each binary's flags file).
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

namespace pstrain::job {

// Which processes read a field (a bit set).
enum Role : uint8_t {
  kWorker = 1,
  kServer = 2,
  kCoordinator = 4,
};

struct JobField {
  absl::string_view path;  // "train.batch_size"; tables: "tables.*.dim" (the entry named "*")
  absl::string_view flag;  // "batch_size"
  uint8_t roles;          // Role bits
};

// Every field, in the order `pstrain job show` prints them (by section).
const std::vector<JobField>& JobFields();
// The field at `path`, or null.
const JobField* FieldAtPath(absl::string_view path);
// The field whose flag is `flag`, or null.
const JobField* FieldOfFlag(absl::string_view flag);
// The sections of a job file, in order ("cluster", "tables", ...).
const std::vector<std::string>& JobSections();

// Settings that are not in a job on purpose, with the reason (printed when a
// file names one): a node's own endpoints, ranks, ports and keys.
absl::string_view NodeSettingReason(absl::string_view key);

}  // namespace pstrain::job
