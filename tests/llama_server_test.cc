// The LLM client and proposer against a real OpenAI-compatible server:
// llama.cpp's llama-server with SmolLM2-135M-Instruct (scripts/llama_server.sh
// builds and fetches both into third_party/llama/). Started on a free loopback
// port with 4 slots. Its kernels are nonsense: the point is that n samples
// and streaming work, garbage gets clear verdicts, nothing breaks, and every
// exchange is stored. Skips when the server or model is absent.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "proto/problem.h"
#include "server/history.h"
#include "server/measure_callbacks.h"
#include "server/proposers/llm/llm_proposer.h"

#ifndef ANVIL_SOURCE_DIR
#define ANVIL_SOURCE_DIR ""
#endif

namespace anvil {
namespace {

const std::string kServer = std::string(ANVIL_SOURCE_DIR) + "/third_party/llama/bin/llama-server";
const std::string kModel =
    std::string(ANVIL_SOURCE_DIR) + "/third_party/llama/models/SmolLM2-135M-Instruct.Q4_1.gguf";

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class LlamaServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kServer) || !std::filesystem::exists(kModel)) return;
    port_ = FreePort();
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      execl(kServer.c_str(), kServer.c_str(), "-m", kModel.c_str(), "--host", "127.0.0.1", "--port",
            port.c_str(), "-np", "4", "-c", "16384", "-t", "2", "--log-disable", nullptr);
      _exit(127);
    }
    llm::ClientOptions o = Options();
    o.max_retries = 0;
    o.max_tokens = 4;
    std::unique_ptr<llm::Client> probe = std::move(*llm::Client::Create(o));
    for (int i = 0; i < 720; ++i) {  // loading the model: up to three minutes on a busy machine
      absl::StatusOr<llm::ChatResult> r = probe->Complete({"", {{"user", "hi"}}, 1, 0, nullptr});
      if (r.ok() && r->error.empty()) return;
      usleep(250'000);
    }
    ready_error_ = "llama-server did not answer within 180 s";
  }
  static void TearDownTestSuite() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  void SetUp() override {
    if (pid_ <= 0) GTEST_SKIP() << "no llama-server or model in third_party/llama (scripts/llama_server.sh)";
    ASSERT_EQ(ready_error_, "");
  }
  static llm::ClientOptions Options() {
    llm::ClientOptions o;
    o.base_url = absl::StrCat("http://127.0.0.1:", port_, "/v1");
    o.model = "smollm2";
    o.max_tokens = 96;
    o.seed = 42;
    o.total_timeout = absl::Seconds(120);
    return o;
  }
  static inline pid_t pid_ = -1;
  static inline int port_ = 0;
  static inline std::string ready_error_;
};

TEST_F(LlamaServerTest, AnswersNSamplesAndStreams) {
  llm::ClientOptions o = Options();
  std::unique_ptr<llm::Client> client = std::move(*llm::Client::Create(o));
  absl::StatusOr<llm::ChatResult> r =
      client->Complete({"You are terse.", {{"user", "Name a GPU."}}, 4, std::nullopt, nullptr});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->error, "");
  EXPECT_EQ(r->choices.size(), 4u);
  EXPECT_GT(r->completion_tokens, 0);
  EXPECT_FALSE(r->tokens_estimated);
  o.stream = true;
  std::unique_ptr<llm::Client> streaming = std::move(*llm::Client::Create(o));
  r = streaming->Complete({"You are terse.", {{"user", "Name a CPU."}}, 2, std::nullopt, nullptr});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->error, "");
  ASSERT_EQ(r->choices.size(), 2u);
  EXPECT_FALSE(r->choices[0].text.empty());
  EXPECT_GT(r->first_token_ms, 0);
}

TEST_F(LlamaServerTest, GarbageKernelsGetClearVerdictsAndEveryExchangeIsStored) {
  const std::string db = ::testing::TempDir() + "/llama_server_test.db";
  std::filesystem::remove(db);
  std::unique_ptr<Store> store = std::move(*Store::Open(db));
  ASSERT_TRUE(store->CreateJob("job-llama", v1::OptimizeKernelRequest()).ok());
  std::unique_ptr<llm::Client> client = std::move(*llm::Client::Create(Options()));
  LlmProposerOptions lo;
  lo.client = client.get();
  lo.prompts_dir = std::string(ANVIL_SOURCE_DIR) + "/prompts";
  lo.give_up_after = 2;
  std::unique_ptr<LlmProposer> proposer = std::move(*LlmProposer::Create(lo));
  StoreHistory history(*store);
  SearchView view;
  view.job_id = "job-llama";
  view.figure = "device";
  view.history = &history;
  std::vector<ProposerRecord> records;  // kept as the coordinator keeps them
  view.records = &records;
  ProblemView p;
  p.problem = MakeProblem("H100-SXM5-80GB", "sm_90a", MakeShape(4096, 4096, 4096), v1::LAYOUT_NT);
  p.name = "4096x4096x4096 nt";
  view.problems = {p};
  absl::StatusOr<std::vector<Proposal>> props = proposer->Propose(view, 8);
  ASSERT_TRUE(props.ok()) << props.status();
  std::vector<Observation> none;
  MeasuredRound round{"job-llama", "device", &view.problems, &none, {}, std::move(records)};
  ASSERT_TRUE(MakeExchangeCallback(*store)->Apply(round).ok());
  absl::StatusOr<std::vector<LlmExchange>> ex = store->ListLlmExchanges("job-llama");
  ASSERT_TRUE(ex.ok());
  ASSERT_GE(ex->size(), 1u);
  for (const LlmExchange& e : *ex) {
    EXPECT_EQ(e.error, "");
    EXPECT_EQ(e.samples.size(), 4u);
    EXPECT_GT(e.completion_tokens, 0);
    for (const LlmSample& s : e.samples) {
      if (s.status == "proposed") continue;  // a kernel that passed the checks goes to nvcc
      EXPECT_FALSE(s.reason.empty()) << s.status;
      EXPECT_TRUE(s.reward.has_value());
      EXPECT_LT(*s.reward, 0);
    }
  }
  for (const Proposal& prop : *props) EXPECT_EQ(prop.candidate.proposer(), "llm");
}

}  // namespace
}  // namespace anvil
