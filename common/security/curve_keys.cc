#include "common/security/curve_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <zmq.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/status.h"

namespace pstrain {
namespace {

constexpr size_t kZ85KeyChars = 40;

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The value of `name = "VALUE"` lines; empty when absent.
std::string QuotedValue(absl::string_view text, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, name)) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "=")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (line.size() >= 2 && line.front() == '"' && line.back() == '"') {
      return std::string(line.substr(1, line.size() - 2));
    }
  }
  return "";
}

// Writes `contents` to `path` with `mode`, whole or not at all.
absl::Status WriteKeyFile(const std::string& path, const std::string& contents, mode_t mode) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("create ", tmp));
  absl::Status st;
  if (fchmod(fd, mode) != 0) st = ErrnoToStatus(errno, absl::StrCat("chmod ", tmp));
  size_t done = 0;
  while (st.ok() && done < contents.size()) {
    ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) st = ErrnoToStatus(errno, absl::StrCat("write ", tmp));
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (st.ok() && fsync(fd) != 0) st = ErrnoToStatus(errno, absl::StrCat("fsync ", tmp));
  close(fd);
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoToStatus(errno, absl::StrCat("rename ", tmp, " to ", path));
  }
  if (!st.ok()) unlink(tmp.c_str());
  return st;
}

std::string KeyPairText(const CurveKeyPair& kp, const std::string& name) {
  return absl::StrCat("# pstrain CURVE key pair \"", name,
                      "\". Keep it secret: mode 0600, readable by the pstrain user only.\n",
                      "public-key = \"", kp.public_key, "\"\n", "secret-key = \"", kp.secret_key,
                      "\"\n");
}

bool ValidClientName(const std::string& name) {
  if (name.empty() || name == kClusterKeyName || name.size() > 64 || name[0] == '.') return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status CheckCurveAvailable() {
  if (zmq_has("curve") == 0) {
    return absl::FailedPreconditionError(
        "--auth=curve: this libzmq was built without CURVE support (libsodium)");
  }
  return absl::OkStatus();
}

absl::StatusOr<CurveKeyPair> GenerateCurveKeyPair() {
  PS_RETURN_IF_ERROR(CheckCurveAvailable());
  char pub[kZ85KeyChars + 1], sec[kZ85KeyChars + 1];
  if (zmq_curve_keypair(pub, sec) != 0) {
    return ErrnoToStatus(zmq_errno(), "zmq_curve_keypair");
  }
  return CurveKeyPair{std::string(pub, kZ85KeyChars), std::string(sec, kZ85KeyChars)};
}

absl::Status CheckZ85Key(absl::string_view key, absl::string_view what) {
  if (key.size() != kZ85KeyChars) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a CURVE key is ", kZ85KeyChars,
                                                   " Z85 characters, not ", key.size()));
  }
  std::string z(key);
  uint8_t bin[32];
  if (zmq_z85_decode(bin, z.c_str()) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a valid Z85 key"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CurveKeyPair> ReadKeyPairFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return ErrnoToStatus(errno, absl::StrCat("key file ", path));
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "key file %s: mode %04o lets others read its secret key; want 0600 (chmod 600 %s)", path,
        st.st_mode & 07777, path));
  }
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  CurveKeyPair kp;
  kp.public_key = QuotedValue(text, "public-key");
  kp.secret_key = QuotedValue(text, "secret-key");
  if (kp.public_key.empty() || kp.secret_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key file ", path, ": needs lines public-key = \"...\" and secret-key = \"...\""));
  }
  PS_RETURN_IF_ERROR(CheckZ85Key(kp.public_key, absl::StrCat("key file ", path, ": public-key")));
  PS_RETURN_IF_ERROR(CheckZ85Key(kp.secret_key, absl::StrCat("key file ", path, ": secret-key")));
  PS_RETURN_IF_ERROR(CheckCurveAvailable());
  char derived[kZ85KeyChars + 1];
  if (zmq_curve_public(derived, kp.secret_key.c_str()) != 0 ||
      kp.public_key != std::string(derived, kZ85KeyChars)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key file ", path, ": its public key does not belong to its secret key"));
  }
  return kp;
}

absl::StatusOr<std::string> ReadPublicKeyFile(const std::string& path) {
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::string key = QuotedValue(text, "public-key");
  if (key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key file ", path, ": needs a line public-key = \"...\""));
  }
  PS_RETURN_IF_ERROR(CheckZ85Key(key, absl::StrCat("key file ", path, ": public-key")));
  return key;
}

absl::StatusOr<std::vector<std::string>> ReadAuthorizedKeys(const std::string& path) {
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::vector<std::string> keys;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    // Z85 has '#': a line is a key when its first word is one, else a comment.
    absl::string_view word = line.substr(0, line.find_first_of(" \t"));
    absl::Status st = CheckZ85Key(word, "");
    if (st.ok()) {
      keys.emplace_back(word);
    } else if (line.front() != '#') {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": not a CURVE public key", st.message()));
    }
  }
  return keys;
}

absl::StatusOr<CurveKeys> LoadCurveKeys(const std::string& keys_dir, const std::string& key_name) {
  CurveKeys keys;
  const std::string own = JoinPath(keys_dir, key_name + ".key");
  PS_ASSIGN_OR_RETURN(CurveKeyPair kp, ReadKeyPairFile(own));
  keys.public_key = kp.public_key;
  keys.secret_key = kp.secret_key;
  if (key_name == kClusterKeyName) {
    keys.server_key = kp.public_key;
  } else if (std::string cluster = JoinPath(keys_dir, kClusterKeyFile); FileExists(cluster)) {
    PS_ASSIGN_OR_RETURN(CurveKeyPair ckp, ReadKeyPairFile(cluster));
    keys.server_key = ckp.public_key;
  } else {
    PS_ASSIGN_OR_RETURN(keys.server_key, ReadPublicKeyFile(JoinPath(keys_dir, kClusterPublicFile)));
  }
  const std::string authorized = JoinPath(keys_dir, kAuthorizedKeysFile);
  if (key_name == kClusterKeyName || FileExists(authorized)) {
    PS_ASSIGN_OR_RETURN(keys.allowed_clients, ReadAuthorizedKeys(authorized));
  }
  return keys;
}

absl::StatusOr<CurveKeys> CurveKeysForAuth(const std::string& auth, const std::string& keys_dir,
                                           const std::string& key_name) {
  std::string mode = absl::AsciiStrToLower(auth);
  if (mode == "none" || mode.empty()) return CurveKeys{};
  if (mode != "curve") {
    return absl::InvalidArgumentError(absl::StrCat("--auth must be none or curve, not '", auth, "'"));
  }
  if (keys_dir.empty()) {
    return absl::InvalidArgumentError(
        "--auth=curve needs --keys_dir=DIR (make one with `pstrain keygen --out DIR`)");
  }
  PS_RETURN_IF_ERROR(CheckCurveAvailable());
  return LoadCurveKeys(keys_dir, key_name);
}

absl::StatusOr<std::vector<std::string>> WriteKeys(const KeygenOptions& options) {
  if (options.out_dir.empty()) return absl::InvalidArgumentError("--out is required");
  const bool client = !options.client.empty();
  if (client && !ValidClientName(options.client)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--client '", options.client, "': use letters, digits, '_', '-', '.' (and not 'cluster')"));
  }
  PS_RETURN_IF_ERROR(MakeDirs(options.out_dir));
  const std::string authorized = JoinPath(options.out_dir, kAuthorizedKeysFile);
  const std::string name = client ? options.client : kClusterKeyName;
  const std::string key_file = JoinPath(options.out_dir, name + ".key");
  std::vector<std::string> written;
  if (FileExists(key_file) && !options.force) {
    return absl::AlreadyExistsError(
        absl::StrCat(key_file, " exists; pass --force to replace it (nodes using it lose access)"));
  }
  PS_ASSIGN_OR_RETURN(CurveKeyPair kp, GenerateCurveKeyPair());
  if (!client) {
    PS_RETURN_IF_ERROR(WriteKeyFile(key_file, KeyPairText(kp, name), 0600));
    written.push_back(key_file);
    const std::string pub = JoinPath(options.out_dir, kClusterPublicFile);
    PS_RETURN_IF_ERROR(WriteKeyFile(
        pub, absl::StrCat("# pstrain cluster public key\npublic-key = \"", kp.public_key, "\"\n"),
        0644));
    written.push_back(pub);
    PS_RETURN_IF_ERROR(WriteKeyFile(
        authorized,
        absl::StrCat("# Public keys admitted to the cluster: one per line, then a label.\n",
                     kp.public_key, " cluster\n"),
        0644));
    written.push_back(authorized);
    return written;
  }
  // A client key pair joins the list the cluster admits.
  if (!FileExists(authorized)) {
    return absl::FailedPreconditionError(absl::StrCat(
        authorized, " not found: make the cluster keys first (pstrain keygen --out ",
        options.out_dir, ")"));
  }
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(authorized));
  std::string old_public;
  if (auto old = ReadKeyPairFile(key_file); old.ok()) old_public = old->public_key;
  std::string kept;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    absl::string_view word = absl::StripAsciiWhitespace(line);
    word = word.substr(0, word.find_first_of(" \t"));
    if (!old_public.empty() && word == old_public) continue;  // replaced by --force
    absl::StrAppend(&kept, line, "\n");
  }
  PS_RETURN_IF_ERROR(WriteKeyFile(key_file, KeyPairText(kp, name), 0600));
  written.push_back(key_file);
  PS_RETURN_IF_ERROR(
      WriteKeyFile(authorized, absl::StrCat(kept, kp.public_key, " ", name, "\n"), 0644));
  written.push_back(authorized);
  return written;
}

}  // namespace pstrain
