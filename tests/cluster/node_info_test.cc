// HostOf and AdvertisedEndpoint: where a node's endpoint says it can be
// reached.
#include "cluster/node_info.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace {

TEST(HostOf, TcpEndpointGivesItsHost) {
  EXPECT_EQ(HostOf("tcp://10.0.0.5:7000"), "10.0.0.5");
  EXPECT_EQ(HostOf("tcp://worker-3.example:41234"), "worker-3.example");
  EXPECT_EQ(HostOf("tcp://localhost"), "localhost");  // no port
}

TEST(HostOf, Ipv6EndpointGivesTheAddressWithoutBrackets) {
  EXPECT_EQ(HostOf("tcp://[::1]:7000"), "::1");
  EXPECT_EQ(HostOf("tcp://[fe80::1%eth0]:7000"), "fe80::1%eth0");
  EXPECT_EQ(HostOf("tcp://[::1]"), "::1");
}

TEST(HostOf, EndpointOfAnotherTransportGivesLoopback) {
  EXPECT_EQ(HostOf("worker0"), "127.0.0.1");          // in-process names
  EXPECT_EQ(HostOf("ipc:///tmp/w0.sock"), "127.0.0.1");
  EXPECT_EQ(HostOf(""), "127.0.0.1");
}

TEST(AdvertisedEndpoint, WildcardBindIsAdvertisedUnderTheGivenHost) {
  EXPECT_EQ(AdvertisedEndpoint("tcp://0.0.0.0:7000", "10.1.2.3"), "tcp://10.1.2.3:7000");
  EXPECT_EQ(AdvertisedEndpoint("tcp://0.0.0.0:7000", ""), "tcp://" + LocalHostName() + ":7000");
  EXPECT_EQ(AdvertisedEndpoint("tcp://127.0.0.1:7000", "10.1.2.3"), "tcp://127.0.0.1:7000");
  EXPECT_EQ(AdvertisedEndpoint("worker0", "10.1.2.3"), "worker0");
}

}  // namespace
}  // namespace pstrain
