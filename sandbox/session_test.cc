// Session: a job that answers exchange after exchange in one process, each
// exchange under its own deadline, output cap and cancel; the job's end is
// reaped with its result. Each test runs with kNone and with kAuto.
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sandbox/test_util.h"

namespace anvil::sandbox {
namespace {

using testing::ShellSpec;

class SessionTest : public ::testing::TestWithParam<Isolation> {
 protected:
  ScratchDir dir_ = testing::MakeScratch();
  std::unique_ptr<Session> Start(const std::string& script, absl::Duration wall = absl::Seconds(30)) {
    Spec s = ShellSpec(dir_.path(), script, GetParam());
    s.limits.wall_time = wall;
    s.limits.kill_grace = absl::Milliseconds(200);
    s.limits.output_cap_bytes = 64 << 10;
    s.limits.kill_at_output_cap = true;
    absl::StatusOr<std::unique_ptr<Session>> got = Session::Start(s);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *std::move(got) : nullptr;
  }
  // Sends `input`; the answer is complete once a whole line has come back.
  absl::StatusOr<bool> Send(Session& s, const std::string& input, std::string* out,
                            absl::Duration wall = absl::ZeroDuration()) {
    out->clear();
    Session::Exchange e;
    e.input = input;
    e.wall_time = wall;
    e.on_stdout = [out](absl::string_view chunk) -> std::optional<absl::Duration> {
      out->append(chunk.data(), chunk.size());
      return std::nullopt;
    };
    e.answered = [out] { return absl::EndsWith(*out, "\n"); };
    return s.Send(e);
  }
};

// A process that stays up: the token it drew at start answers every line.
constexpr char kEcho[] = "t=$$-$(date +%N); while read l; do echo \"$t $l\"; done";

TEST_P(SessionTest, OneProcessAnswersExchangeAfterExchangeAndEndsAtEndOfInput) {
  std::unique_ptr<Session> s = Start(kEcho);
  ASSERT_NE(s, nullptr);
  std::string first, second;
  ASSERT_EQ(Send(*s, "one\n", &first).value_or(false), true);
  ASSERT_EQ(Send(*s, "two\n", &second).value_or(false), true);
  ASSERT_TRUE(absl::EndsWith(first, " one\n")) << first;
  ASSERT_TRUE(absl::EndsWith(second, " two\n")) << second;
  EXPECT_EQ(first.substr(0, first.size() - 4), second.substr(0, second.size() - 4));  // one process
  absl::StatusOr<Result> r = s->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_FALSE(r->timed_out);
  EXPECT_FALSE(s->Finish().ok());  // once only
}

// The wall limit counts from each exchange's start: time spent between
// exchanges is not the job's, and a hang in a later exchange is killed at
// that exchange's limit.
TEST_P(SessionTest, EachExchangeHasItsOwnDeadline) {
  std::unique_ptr<Session> s = Start("read l; echo first; read l; sleep 1000", absl::Seconds(1));
  ASSERT_NE(s, nullptr);
  std::string out;
  ASSERT_EQ(Send(*s, "go\n", &out).value_or(false), true);
  absl::SleepFor(absl::Milliseconds(1500));  // longer than the limit, between exchanges
  ASSERT_EQ(Send(*s, "go\n", &out).value_or(true), false);
  EXPECT_EQ(Send(*s, "go\n", &out).value_or(true), false);  // once ended, always
  absl::StatusOr<Result> r = s->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(r->wall_seconds, 5);
}

TEST_P(SessionTest, AnExchangeMayShortenItsOwnDeadline) {
  std::unique_ptr<Session> s = Start("read l; echo ready; sleep 1000");
  ASSERT_NE(s, nullptr);
  Session::Exchange e;
  e.input = "go\n";
  e.on_stdout = [](absl::string_view) -> std::optional<absl::Duration> { return absl::Milliseconds(300); };
  ASSERT_EQ(s->Send(e).value_or(true), false);
  absl::StatusOr<Result> r = s->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(r->time_limit_seconds, 5);
}

// The output cap is per exchange: a job that printed much in earlier
// exchanges is not charged for it later, and a flood still ends it.
TEST_P(SessionTest, TheOutputCapHoldsPerExchange) {
  std::unique_ptr<Session> s =
      Start("while read l; do if [ \"$l\" = flood ]; then head -c 10000000 /dev/zero; fi; head -c 40000 /dev/zero | tr '\\0' x; echo; done");
  ASSERT_NE(s, nullptr);
  std::string out;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Send(*s, "more\n", &out).value_or(false), true) << i;
  EXPECT_EQ(out.size(), 40001u);
  ASSERT_EQ(Send(*s, "flood\n", &out).value_or(true), false);
  absl::StatusOr<Result> r = s->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->output_capped);
}

TEST_P(SessionTest, ACancelledExchangeKillsTheJob) {
  std::unique_ptr<Session> s = Start("read l; sleep 1000");
  ASSERT_NE(s, nullptr);
  Session::Exchange e;
  e.input = "go\n";
  e.cancelled = [start = absl::Now()] { return absl::Now() - start > absl::Milliseconds(300); };
  ASSERT_EQ(s->Send(e).value_or(true), false);
  absl::StatusOr<Result> r = s->Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->cancelled);
}

TEST_P(SessionTest, DestroyingALiveSessionKillsAndReapsItsJob) {
  const std::string token = absl::StrCat("anvil-session-test-", getpid());
  {
    // Its output is read as it is reaped, with no exchange ever made.
    std::unique_ptr<Session> s = Start(absl::StrCat("echo started; exec -a ", token, " sleep 1000"));
    ASSERT_NE(s, nullptr);
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_EQ(testing::CountProcessesWith(token), 0);
  EXPECT_EQ(testing::CountChildren(), 0);
}

INSTANTIATE_TEST_SUITE_P(Isolation, SessionTest, ::testing::Values(Isolation::kNone, Isolation::kAuto),
                         [](const ::testing::TestParamInfo<Isolation>& i) {
                           return i.param == Isolation::kNone ? "None" : "Auto";
                         });

}  // namespace
}  // namespace anvil::sandbox
