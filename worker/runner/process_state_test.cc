#include "worker/runner/process_state.h"

#include <gtest/gtest.h>

namespace anvil::runner {
namespace {

ProcessState State() {
  ProcessState s;
  s.values = {{"threads", 4}, {"limit.stack_size", 1024}, {"stream.priority", 0}};
  s.free_device_bytes = int64_t(70) << 30;
  return s;
}

TEST(DescribeChanges, NothingWhenEveryFactIsAsBefore) {
  EXPECT_EQ(DescribeChanges(State(), State()), "");
}

TEST(DescribeChanges, NamesEachFactThatChanged) {
  ProcessState after = State();
  after.values["limit.stack_size"] = 4096;
  after.values["threads"] = 5;
  EXPECT_EQ(DescribeChanges(State(), after), "limit.stack_size 1024 -> 4096; threads 4 -> 5");
}

TEST(DescribeChanges, AFactOnOneSideOnlyIsAChange) {
  ProcessState after = State();
  after.values.erase("stream.priority");
  after.values["limit.dev_runtime_sync_depth"] = 2;
  EXPECT_EQ(DescribeChanges(State(), after),
            "limit.dev_runtime_sync_depth absent -> 2; stream.priority 0 -> absent");
}

TEST(DescribeChanges, MemoryInUseCountsOnlyWhenItGrewBeyondTheTolerance) {
  ProcessState after = State();
  after.free_device_bytes -= kMemoryToleranceBytes;
  EXPECT_EQ(DescribeChanges(State(), after), "");
  after.free_device_bytes -= 1;
  EXPECT_EQ(DescribeChanges(State(), after), "device memory in use grew by 1024 MiB (1024 MiB allowed)");
  after.free_device_bytes = State().free_device_bytes - (int64_t(3) << 30);
  EXPECT_EQ(DescribeChanges(State(), after), "device memory in use grew by 3072 MiB (1024 MiB allowed)");
  after.free_device_bytes = State().free_device_bytes - (int64_t(300) << 20);  // code loaded
  EXPECT_EQ(DescribeChanges(State(), after), "");
  after.free_device_bytes = State().free_device_bytes + (int64_t(1) << 30);  // freed: no hazard
  EXPECT_EQ(DescribeChanges(State(), after), "");
}

}  // namespace
}  // namespace anvil::runner
