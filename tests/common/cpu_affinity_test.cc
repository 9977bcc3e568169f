#include "common/cpu_affinity.h"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace pstrain {
namespace {

TEST(CpuList, ParsesItemsAndRangesSortedWithoutDuplicates) {
  auto cpus = ParseCpuList("6,0-3,2");
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 3, 6}));
  EXPECT_EQ(FormatCpuList(*cpus), "0-3,6");
  EXPECT_EQ(FormatCpuList({1}), "1");
  EXPECT_EQ(FormatCpuList({0, 2, 3, 5, 6, 7}), "0,2-3,5-7");
  EXPECT_EQ(FormatCpuList({}), "");
}

TEST(CpuList, RejectsWhatTasksetWouldNot) {
  for (const char* bad : {"", ",", "1,", "a", "-1", "3-1", "1-", "0-99999", "1.5"}) {
    auto cpus = ParseCpuList(bad);
    EXPECT_EQ(cpus.status().code(), absl::StatusCode::kInvalidArgument) << "\"" << bad << "\"";
    if (!cpus.ok()) EXPECT_NE(cpus.status().message().find("0-3,6"), absl::string_view::npos);
  }
}

// The CPUs of the calling thread, read back from the kernel.
std::vector<int> ThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

TEST(PinCurrentThread, PinsThisThreadAndThoseItStartsButNotOthers) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  std::vector<int> seen_by_child, seen_by_other;
  std::thread other([&] { seen_by_other = ThreadCpus(); });
  other.join();
  std::thread pinned([&] {
    ASSERT_TRUE(PinCurrentThread({allowed.back()}).ok());
    EXPECT_EQ(ThreadCpus(), std::vector<int>{allowed.back()});
    std::thread child([&] { seen_by_child = ThreadCpus(); });
    child.join();
  });
  pinned.join();
  EXPECT_EQ(seen_by_child, std::vector<int>{allowed.back()});
  EXPECT_EQ(seen_by_other, allowed);
  EXPECT_EQ(ThreadCpus(), allowed);  // this thread was not touched
}

TEST(PinCurrentThread, RefusesCpusTheProcessMayNotUse) {
  const std::vector<int> allowed = AllowedCpus();
  const int outside = allowed.back() + 1;
  std::thread t([&] {
    absl::Status st = PinCurrentThread({outside});
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(FormatCpuList(allowed)), absl::string_view::npos) << st;
    EXPECT_EQ(ThreadCpus(), allowed);
    EXPECT_EQ(PinCurrentThread({}).code(), absl::StatusCode::kInvalidArgument);
  });
  t.join();
}

TEST(PinProcess, EmptyListLeavesTheProcessAloneAndBadListsNameTheFlag) {
  const std::vector<int> allowed = AllowedCpus();
  EXPECT_TRUE(PinProcess("").ok());
  EXPECT_EQ(AllowedCpus(), allowed);
  absl::Status st = PinProcess("2-1");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--cpus"), absl::string_view::npos) << st;
  EXPECT_EQ(AllowedCpus(), allowed);
}

// In a child process (it pins the whole process): a thread started before
// PinProcess ends up pinned too.
TEST(PinProcess, PinsThreadsThatWereAlreadyRunning) {
  const int cpu = AllowedCpus().back();
  EXPECT_EXIT(
      {
        std::atomic<bool> go{false};
        std::vector<int> seen;
        std::thread early([&] {
          while (!go.load()) std::this_thread::yield();
          seen = ThreadCpus();
        });
        const bool ok = PinProcess(std::to_string(cpu)).ok();
        go = true;
        early.join();
        std::exit(ok && seen == std::vector<int>{cpu} && ThreadCpus() == std::vector<int>{cpu} ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace pstrain
