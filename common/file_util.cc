#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain {
namespace {

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat("write ", path));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

void SyncDir(const std::string& path) {
  int dfd = open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("create ", tmp));
  absl::Status st = WriteAll(fd, contents.data(), contents.size(), tmp);
  if (st.ok() && fsync(fd) != 0) st = ErrnoToStatus(errno, absl::StrCat("fsync ", tmp));
  if (close(fd) != 0 && st.ok()) st = ErrnoToStatus(errno, absl::StrCat("close ", tmp));
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoToStatus(errno, absl::StrCat("rename ", tmp, " -> ", path));
  }
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  SyncDir(path);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  // One allocation of the file's size and large reads (a checkpoint shard
  // can be gigabytes; a stringstream copies it twice, growing as it goes).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoToStatus(err, absl::StrCat("stat ", path));
  }
  std::string out;
  out.resize(static_cast<size_t>(std::max<off_t>(st.st_size, 0)));
  size_t got = 0;
  char probe[4096];
  while (true) {
    // At the size fstat gave: a small read says whether the file grew.
    const bool at_end = got == out.size();
    char* dst = at_end ? probe : out.data() + got;
    const ssize_t n = read(fd, dst, at_end ? sizeof(probe) : out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return ErrnoToStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    if (at_end) out.append(probe, static_cast<size_t>(n));
    got += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(got);
  return out;
}

absl::Status MakeDirs(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, absl::StrCat("mkdir ", cur));
    }
  }
  return absl::OkStatus();
}

absl::Status ReplaceDirectory(const std::string& from, const std::string& to) {
  // An absent or empty `to` is replaced by a plain rename.
  if (rename(from.c_str(), to.c_str()) == 0) {
    SyncDir(to);
    return absl::OkStatus();
  }
  if (errno != ENOTEMPTY && errno != EEXIST) {
    return ErrnoToStatus(errno, absl::StrCat("rename ", from, " -> ", to));
  }
  if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno == EINVAL || errno == ENOSYS) {
      return absl::UnimplementedError(
          absl::StrCat("exchange ", from, " <-> ", to, ": the file system cannot swap folders"));
    }
    return ErrnoToStatus(errno, absl::StrCat("exchange ", from, " <-> ", to));
  }
  SyncDir(to);
  // The old folder is gone from `to` already; what is left of it at
  // `from` is removed by the next writer of `from` if not here.
  std::error_code ignored;
  std::filesystem::remove_all(from, ignored);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Open(const std::string& path) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("create ", tmp));
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, tmp, fd));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) close(fd_);
  if (!committed_) unlink(tmp_.c_str());
}

absl::Status AtomicFileWriter::Append(const void* data, size_t n) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": writer closed"));
  PS_RETURN_IF_ERROR(WriteAll(fd_, static_cast<const char*>(data), n, tmp_));
  checksum_.Update(data, n);
  bytes_ += n;
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": writer closed"));
  absl::Status st;
  if (fsync(fd_) != 0) st = ErrnoToStatus(errno, absl::StrCat("fsync ", tmp_));
  if (close(fd_) != 0 && st.ok()) st = ErrnoToStatus(errno, absl::StrCat("close ", tmp_));
  fd_ = -1;
  PS_RETURN_IF_ERROR(st);
  if (rename(tmp_.c_str(), path_.c_str()) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("rename ", tmp_, " -> ", path_));
  }
  committed_ = true;
  SyncDir(path_);
  return absl::OkStatus();
}

}  // namespace pstrain
