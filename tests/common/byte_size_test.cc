#include "common/byte_size.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace {

TEST(ByteSize, NumbersAndBinaryUnits) {
  EXPECT_EQ(*ParseByteSize("1073741824"), uint64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("1GB"), uint64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("1gib"), uint64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("512MiB"), uint64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("64m"), uint64_t{64} << 20);
  EXPECT_EQ(*ParseByteSize(" 2 T "), uint64_t{2} << 40);
  EXPECT_EQ(*ParseByteSize("1.5G"), uint64_t{3} << 29);
  EXPECT_EQ(*ParseByteSize("100B"), 100u);
}

TEST(ByteSize, AnythingElseIsRefusedNamingTheText) {
  for (const char* bad : {"", "GB", "1 PB", "1GiBs", "-1G", "1e3", "1..2M", "99999999999T"}) {
    auto r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("\"") + bad), std::string::npos) << r.status();
  }
}

}  // namespace
}  // namespace pstrain
