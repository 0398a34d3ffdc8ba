#include "llm/retry.h"

#include <gtest/gtest.h>

namespace anvil::llm {
namespace {

TEST(ShouldRetry, FollowsTheSdks) {
  for (long s : {0L, 408L, 409L, 429L, 500L, 503L}) EXPECT_TRUE(ShouldRetry(s, {})) << s;
  for (long s : {400L, 401L, 404L, 422L}) EXPECT_FALSE(ShouldRetry(s, {})) << s;
  EXPECT_FALSE(ShouldRetry(500, {{"x-should-retry", "false"}}));
  EXPECT_TRUE(ShouldRetry(400, {{"x-should-retry", "true"}}));
}

TEST(RetryDelay, HonoursRetryAfterMsThenSecondsThenDate) {
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  EXPECT_EQ(RetryDelay(0, {{"retry-after-ms", "250"}, {"retry-after", "9"}}, now, 0),
            absl::Milliseconds(250));
  EXPECT_EQ(RetryDelay(0, {{"retry-after", "3"}}, now, 0), absl::Seconds(3));
  // 1'700'000'000 is Tue, 14 Nov 2023 22:13:20 GMT.
  EXPECT_EQ(RetryDelay(0, {{"retry-after", "Tue, 14 Nov 2023 22:13:25 GMT"}}, now, 0),
            absl::Seconds(5));
}

TEST(RetryDelay, IgnoresWaitsOutsideZeroToSixtySeconds) {
  const absl::Time now = absl::UnixEpoch();
  EXPECT_EQ(RetryDelay(0, {{"retry-after", "120"}}, now, 0), absl::Milliseconds(500));
  EXPECT_EQ(RetryDelay(1, {{"retry-after", "0"}}, now, 0), absl::Seconds(1));
  EXPECT_EQ(RetryDelay(0, {{"retry-after", "soon"}}, now, 0), absl::Milliseconds(500));
}

TEST(RetryDelay, BacksOffExponentiallyToEightSecondsWithJitter) {
  const absl::Time now = absl::UnixEpoch();
  EXPECT_EQ(RetryDelay(0, {}, now, 0), absl::Milliseconds(500));
  EXPECT_EQ(RetryDelay(2, {}, now, 0), absl::Seconds(2));
  EXPECT_EQ(RetryDelay(10, {}, now, 0), absl::Seconds(8));
  EXPECT_EQ(RetryDelay(10, {}, now, 0.5), absl::Seconds(7));  // up to 25% less
}

}  // namespace
}  // namespace anvil::llm
