// pstrain keygen --out DIR [--client NAME] [--force]: the CURVE keys of a
// cluster (see common/security/curve_keys.h for the files).
#include <cstdio>

#include "common/security/curve_keys.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/commands.h"

namespace pstrain::launcher {

namespace {

FlagSet KeygenFlags() {
  FlagSet flags;
  flags.Define("out", "", "Folder to write the keys to (made if missing).")
      .Define("client", "",
              "Make an extra client key pair NAME.key instead, and add its public key to "
              "authorized_keys (the cluster keys must exist).")
      .Define("force", "false", "Replace existing keys (nodes using the old ones lose access).");
  return flags;
}

}  // namespace

std::string KeygenHelp() {
  return absl::StrCat(
      "usage: pstrain keygen --out DIR [--client NAME] [--force]\n\n"
      "Makes the CURVE keys of a cluster for --auth=curve --keys_dir=DIR:\n"
      "  DIR/cluster.key      the key pair every node uses (mode 0600: keep it secret)\n"
      "  DIR/cluster.pub      its public key, for hosts that only connect\n"
      "  DIR/authorized_keys  the public keys admitted, one per line\n"
      "With --client NAME: DIR/NAME.key, a key pair of its own for a tool or probe\n"
      "(e.g. pstrain health --key_name=NAME), its public key added to authorized_keys.\n"
      "Existing keys are not overwritten without --force.\n\n",
      KeygenFlags().Help());
}

absl::Status RunKeygen(const std::vector<std::string>& argv) {
  FlagSet flags = KeygenFlags();
  PS_RETURN_IF_ERROR(flags.Parse(argv, /*keep_unknown=*/false).status());
  KeygenOptions o;
  o.out_dir = flags.Get("out");
  o.client = flags.Get("client");
  o.force = flags.GetBool("force");
  if (o.out_dir.empty()) return UsageError("--out is required");
  absl::StatusOr<std::vector<std::string>> written = WriteKeys(o);
  // Keys already there: the invocation needs --force.
  if (written.status().code() == absl::StatusCode::kAlreadyExists) {
    return UsageError(written.status().message());
  }
  if (!written.ok()) return written.status();
  for (const std::string& f : *written) std::printf("wrote %s\n", f.c_str());
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
