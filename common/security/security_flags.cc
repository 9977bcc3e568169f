#include "common/security/security_flags.h"

#include "absl/flags/flag.h"
#include "common/security/curve_keys.h"

ABSL_FLAG(std::string, auth, "none",
          "none | curve: encrypt and authenticate every connection with ZeroMQ CURVE; only "
          "holders of a key in --keys_dir/authorized_keys may connect.");
ABSL_FLAG(std::string, keys_dir, "",
          "With --auth=curve: folder with cluster.key and authorized_keys (pstrain keygen).");

namespace pstrain {

absl::StatusOr<CurveKeys> CurveKeysFromFlags() {
  return CurveKeysForAuth(absl::GetFlag(FLAGS_auth), absl::GetFlag(FLAGS_keys_dir));
}

}  // namespace pstrain
