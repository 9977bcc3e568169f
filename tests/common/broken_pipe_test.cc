#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

#include "common/process.h"

namespace pstrain {
namespace {

// Without IgnoreBrokenPipes the write below ends the process by SIGPIPE
// (the way a Gloo peer that vanished mid-allreduce ended a worker).
TEST(BrokenPipes, AWriteToAClosedPipeFailsWithEpipeInsteadOfEndingTheProcess) {
  IgnoreBrokenPipes();
  IgnoreBrokenPipes();  // idempotent
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  const char byte = 'x';
  EXPECT_EQ(write(fds[1], &byte, 1), -1);
  EXPECT_EQ(errno, EPIPE);
  close(fds[1]);
}

}  // namespace
}  // namespace pstrain
