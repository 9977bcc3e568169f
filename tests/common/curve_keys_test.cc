// Key files of `pstrain keygen`: made with the right modes, refused when
// they would be overwritten, and read back with clear errors when wrong.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "common/security/curve_keys.h"

namespace pstrain {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/pstrain-keys-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  return tmpl;
}

int ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(Keygen, WritesClusterKeysWithSecretFilesOnlyForTheOwner) {
  std::string dir = TempDir() + "/keys";
  auto written = WriteKeys({dir, "", false});
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->size(), 3u);
  EXPECT_EQ(ModeOf(dir + "/cluster.key"), 0600);
  EXPECT_EQ(ModeOf(dir + "/cluster.pub"), 0644);
  EXPECT_EQ(ModeOf(dir + "/authorized_keys"), 0644);
  auto keys = LoadCurveKeys(dir);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->public_key.size(), 40u);
  EXPECT_EQ(keys->server_key, keys->public_key);
  ASSERT_EQ(keys->allowed_clients.size(), 1u);
  EXPECT_EQ(keys->allowed_clients[0], keys->public_key);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST(Keygen, RefusesToOverwriteKeysWithoutForce) {
  std::string dir = TempDir();
  ASSERT_TRUE(WriteKeys({dir, "", false}).ok());
  auto before = ReadFileToString(dir + "/cluster.key");
  auto again = WriteKeys({dir, "", false});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(again.status().message(), "cluster.key")) << again.status();
  EXPECT_EQ(*ReadFileToString(dir + "/cluster.key"), *before);
  ASSERT_TRUE(WriteKeys({dir, "", true}).ok());
  EXPECT_NE(*ReadFileToString(dir + "/cluster.key"), *before);
  std::filesystem::remove_all(dir);
}

TEST(Keygen, ClientKeyIsAddedToAuthorizedKeysAndReplacedWithForce) {
  std::string dir = TempDir();
  EXPECT_EQ(WriteKeys({dir, "probe", false}).status().code(),
            absl::StatusCode::kFailedPrecondition);  // no cluster keys yet
  ASSERT_TRUE(WriteKeys({dir, "", false}).ok());
  ASSERT_TRUE(WriteKeys({dir, "probe", false}).ok());
  EXPECT_EQ(ModeOf(dir + "/probe.key"), 0600);
  auto probe = LoadCurveKeys(dir, "probe");
  ASSERT_TRUE(probe.ok()) << probe.status();
  auto cluster = LoadCurveKeys(dir);
  ASSERT_TRUE(cluster.ok());
  EXPECT_EQ(probe->server_key, cluster->public_key);
  EXPECT_EQ(cluster->allowed_clients,
            (std::vector<std::string>{cluster->public_key, probe->public_key}));
  EXPECT_EQ(WriteKeys({dir, "probe", false}).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(WriteKeys({dir, "probe", true}).ok());
  auto replaced = LoadCurveKeys(dir, "probe");
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(LoadCurveKeys(dir)->allowed_clients,
            (std::vector<std::string>{cluster->public_key, replaced->public_key}));
  EXPECT_EQ(WriteKeys({dir, "../evil", false}).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

TEST(CurveKeys, KeyFileReadableByOthersIsRefusedNamingTheFile) {
  std::string dir = TempDir();
  ASSERT_TRUE(WriteKeys({dir, "", false}).ok());
  ASSERT_EQ(chmod((dir + "/cluster.key").c_str(), 0644), 0);
  auto keys = CurveKeysForAuth("curve", dir);
  EXPECT_EQ(keys.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(keys.status().message(), dir + "/cluster.key")) << keys.status();
  ASSERT_EQ(chmod((dir + "/cluster.key").c_str(), 0400), 0);
  EXPECT_TRUE(CurveKeysForAuth("curve", dir).ok());
  std::filesystem::remove_all(dir);
}

TEST(CurveKeys, CorruptOrMissingKeysGiveClearErrors) {
  std::string dir = TempDir();
  EXPECT_EQ(CurveKeysForAuth("curve", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CurveKeysForAuth("tls", dir).status().code(), absl::StatusCode::kInvalidArgument);
  auto none = CurveKeysForAuth("none", "");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->public_key.empty());
  auto missing = CurveKeysForAuth("curve", dir);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "cluster.key"));

  ASSERT_TRUE(WriteKeys({dir, "", false}).ok());
  std::string text = *ReadFileToString(dir + "/cluster.key");
  // A changed public key no longer matches the secret key.
  size_t at = text.find("public-key = \"") + 14;
  text[at] = text[at] == 'a' ? 'b' : 'a';
  {
    std::ofstream(dir + "/cluster.key", std::ios::trunc) << text;
  }
  auto mismatch = CurveKeysForAuth("curve", dir);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(mismatch.status().message(), "does not belong")) << mismatch.status();
  {
    std::ofstream(dir + "/cluster.key", std::ios::trunc) << "public-key = \"short\"\nsecret-key = \"x\"\n";
  }
  EXPECT_EQ(CurveKeysForAuth("curve", dir).status().code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(WriteKeys({dir, "", true}).ok());
  {
    std::ofstream(dir + "/authorized_keys", std::ios::app) << "not-a-key\n";
  }
  auto bad_list = CurveKeysForAuth("curve", dir);
  EXPECT_EQ(bad_list.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad_list.status().message(), "authorized_keys:3")) << bad_list.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain
