#include "data/synthetic.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/batch_builder.h"
#include "data/eval/metrics.h"

namespace pstrain::worker {
namespace {

constexpr size_t kWriteChunk = size_t{4} << 20;

absl::Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat("write ", path));
    }
    done += static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Writes the rows and fills probabilities/labels; closes nothing.
absl::Status WriteRows(const SyntheticWorld& world, int64_t first_row, int64_t rows, int fd,
                       const std::string& path, std::vector<double>* probs,
                       std::vector<float>* labels, uint64_t* bytes) {
  std::string buf;
  buf.reserve(kWriteChunk + 4096);
  SyntheticRow row;
  for (int64_t r = 0; r < rows; ++r) {
    world.SampleRow(first_row + r, &row);
    world.FormatRow(row, &buf);
    (*probs)[r] = row.probability;
    (*labels)[r] = row.label;
    if (buf.size() >= kWriteChunk) {
      PS_RETURN_IF_ERROR(WriteAll(fd, buf, path));
      *bytes += buf.size();
      buf.clear();
    }
  }
  PS_RETURN_IF_ERROR(WriteAll(fd, buf, path));
  *bytes += buf.size();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SyntheticReport> WriteSynthetic(const SyntheticOptions& options,
                                               const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<SyntheticWorld> world, SyntheticWorld::Create(options));
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd;
  do {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("create ", tmp));

  SyntheticReport report;
  report.rows = options.rows;
  std::vector<double> probs(options.rows);
  std::vector<float> labels(options.rows);
  absl::Status status = WriteRows(*world, options.first_row, options.rows, fd, tmp, &probs, &labels, &report.bytes);
  if (::close(fd) != 0 && status.ok()) status = ErrnoToStatus(errno, absl::StrCat("close ", tmp));
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoToStatus(errno, absl::StrCat("rename ", tmp, " to ", path));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }

  double positives = 0;
  for (float l : labels) positives += l;
  report.positive_rate = options.rows > 0 ? positives / options.rows : 0.0;
  report.oracle_auc = RocAuc(probs, labels);
  report.oracle_logloss = LogLoss(probs, labels);
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

absl::StatusOr<std::shared_ptr<const Batch>> GenerateBatch(const SyntheticWorld& world,
                                                           int64_t first_row, int num_rows,
                                                           const Schema& schema) {
  const SyntheticOptions& o = world.options();
  if (schema.num_dense != o.num_dense || schema.num_sparse != o.num_sparse) {
    return absl::InvalidArgumentError(
        absl::StrCat("GenerateBatch: schema shape (", schema.num_dense, ", ", schema.num_sparse,
                     ") differs from the world's (", o.num_dense, ", ", o.num_sparse, ")"));
  }
  if (num_rows < 0 || first_row < 0) {
    return absl::InvalidArgumentError("GenerateBatch: negative row range");
  }
  BatchBuilder builder(o.num_dense, o.num_sparse, num_rows);
  SyntheticRow row;
  ParsedRow parsed;
  for (int i = 0; i < num_rows; ++i) {
    world.SampleRow(first_row + i, &row);
    world.ToParsedRow(row, schema, &parsed);
    if (!builder.Append(parsed)) {
      return absl::ResourceExhaustedError("GenerateBatch: exceeds the limits of one Batch");
    }
  }
  return builder.Finish();
}

}  // namespace pstrain::worker
