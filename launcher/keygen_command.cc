// pstrain keygen --out DIR [--client NAME] [--force]: the CURVE keys of a
// cluster (see common/security/curve_keys.h for the files).
#include <cstdio>

#include "common/security/curve_keys.h"
#include "launcher/args.h"
#include "launcher/commands.h"

namespace pstrain::launcher {

int RunKeygen(const std::vector<std::string>& argv) {
  FlagSet flags;
  flags.Define("out", "", "Folder to write the keys to (made if missing).")
      .Define("client", "",
              "Make an extra client key pair NAME.key instead, and add its public key to "
              "authorized_keys (the cluster keys must exist).")
      .Define("force", "false", "Replace existing keys (nodes using the old ones lose access).");
  if (WantsHelp(argv)) {
    std::printf(
        "usage: pstrain keygen --out DIR [--client NAME] [--force]\n\n"
        "Makes the CURVE keys of a cluster for --auth=curve --keys_dir=DIR:\n"
        "  DIR/cluster.key      the key pair every node uses (mode 0600: keep it secret)\n"
        "  DIR/cluster.pub      its public key, for hosts that only connect\n"
        "  DIR/authorized_keys  the public keys admitted, one per line\n"
        "With --client NAME: DIR/NAME.key, a key pair of its own for a tool or probe\n"
        "(e.g. pstrain health --key_name=NAME), its public key added to authorized_keys.\n"
        "Existing keys are not overwritten without --force.\n\n%s",
        flags.Help().c_str());
    return 0;
  }
  auto args = ParseArgs(argv);
  absl::Status st = args.status();
  if (st.ok()) st = flags.Take(*args, false).status();
  KeygenOptions o;
  o.out_dir = flags.Get("out");
  o.client = flags.Get("client");
  o.force = flags.GetBool("force");
  if (st.ok() && o.out_dir.empty()) st = absl::InvalidArgumentError("--out is required");
  if (!st.ok()) {
    std::fprintf(stderr, "pstrain keygen: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  auto written = WriteKeys(o);
  if (!written.ok()) {
    std::fprintf(stderr, "pstrain keygen: %s\n", written.status().ToString().c_str());
    return written.status().code() == absl::StatusCode::kAlreadyExists ? 2 : 1;
  }
  for (const std::string& f : *written) std::printf("wrote %s\n", f.c_str());
  return 0;
}

}  // namespace pstrain::launcher
