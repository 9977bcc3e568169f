// CURVE key material of a cluster: key pairs, key files, authorized keys and
// the `--auth`/`--keys_dir` settings that turn them into the transport's
// CurveKeys.
//
// Files in a keys folder (written by `pstrain keygen`):
//   cluster.key      the cluster's key pair, shared by every node (mode 0600):
//                      public-key = "<40 Z85 chars>"
//                      secret-key = "<40 Z85 chars>"
//   cluster.pub      the cluster's public key alone (for client-only hosts)
//   authorized_keys  the public keys admitted, one per line: the key, then
//                    an optional label; lines starting with '#' are comments
//   NAME.key         an extra client key pair (`--client NAME`)
// Every node binds a socket that others connect to, so every node of the
// cluster uses cluster.key; a client key pair only suits a process that
// binds nothing (tools, probes).
//
// Stateless functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/transport.h"

namespace pstrain {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 chars
  std::string secret_key;  // Z85, 40 chars
};

// The file names in a keys folder.
inline constexpr char kClusterKeyFile[] = "cluster.key";
inline constexpr char kClusterPublicFile[] = "cluster.pub";
inline constexpr char kAuthorizedKeysFile[] = "authorized_keys";
inline constexpr char kClusterKeyName[] = "cluster";

// FailedPrecondition when this libzmq was built without CURVE (libsodium).
absl::Status CheckCurveAvailable();

// A fresh random key pair (zmq_curve_keypair).
absl::StatusOr<CurveKeyPair> GenerateCurveKeyPair();

// InvalidArgument unless `key` is 40 characters of valid Z85; `what` names
// the key in the message.
absl::Status CheckZ85Key(absl::string_view key, absl::string_view what);

// Reads a key pair file. Fails (naming the file) when it is missing, not
// readable, open to group or others (it holds a secret), malformed, or when
// its public key does not belong to its secret key.
absl::StatusOr<CurveKeyPair> ReadKeyPairFile(const std::string& path);
// Reads a public key file (cluster.pub): a `public-key = "..."` line.
absl::StatusOr<std::string> ReadPublicKeyFile(const std::string& path);
// Reads an authorized_keys file: its keys in file order.
absl::StatusOr<std::vector<std::string>> ReadAuthorizedKeys(const std::string& path);

// The transport settings of a node that uses key pair `key_name` of folder
// `keys_dir`: its key pair NAME.key, the cluster's public key as the key of
// the servers it connects to (from cluster.key, or cluster.pub when only
// that is there), and the keys of authorized_keys as the clients it admits
// (required for the cluster key pair, optional for a client key pair).
absl::StatusOr<CurveKeys> LoadCurveKeys(const std::string& keys_dir,
                                        const std::string& key_name = kClusterKeyName);

// `--auth` and `--keys_dir` as transport settings: empty CurveKeys for
// "none"; the loaded keys for "curve". InvalidArgument for an unknown mode
// or "curve" without a folder; FailedPrecondition without CURVE support;
// the file's error for a bad key file.
absl::StatusOr<CurveKeys> CurveKeysForAuth(const std::string& auth, const std::string& keys_dir,
                                           const std::string& key_name = kClusterKeyName);

struct KeygenOptions {
  std::string out_dir;
  // Empty: the cluster key pair (cluster.key, cluster.pub, authorized_keys).
  // Otherwise: key pair NAME.key, its public key appended to authorized_keys.
  std::string client;
  bool force = false;  // overwrite existing key files
};

// Writes the keys of `options`; returns the paths written. AlreadyExists
// (naming the file) when a key file is there and `force` is off. Secret key
// files get mode 0600.
absl::StatusOr<std::vector<std::string>> WriteKeys(const KeygenOptions& options);

}  // namespace pstrain
