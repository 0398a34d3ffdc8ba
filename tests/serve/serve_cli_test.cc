// `anvil --server` against a live server prints what local mode prints; the
// server's Prometheus endpoint and TLS. A real anvil_test_server process.
#include <gtest/gtest.h>

#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/problem.h"
#include "server/rpc/client.h"
#include "tests/serve/server_process.h"

namespace anvil {
namespace {

using testing_serve::ServerProcess;

struct CliRun {
  int code = -1;
  std::string out;
};

CliRun Cli(const std::string& args) {
  CliRun r;
  FILE* p = popen(absl::StrCat(ANVIL_CLI, " ", args, " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::string HttpGet(const std::string& url, long* code = nullptr) {
  std::string body;
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t s, size_t n, void* out) {
    static_cast<std::string*>(out)->append(p, s * n);
    return s * n;
  });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_perform(curl);
  if (code != nullptr) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, code);
  curl_easy_cleanup(curl);
  return body;
}

class ServeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/serve_cli_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    db_ = dir_ + "/anvil.db";
    server_ = std::make_unique<ServerProcess>(ANVIL_TEST_SERVER, db_, dir_);
  }
  std::string dir_, db_;
  std::unique_ptr<ServerProcess> server_;
};

// The lines after the progress: the job's summary table.
std::string Summary(const std::string& out) {
  const size_t at = out.find("\njob ");
  return at == std::string::npos ? "" : out.substr(at + 1);
}

TEST_F(ServeCliTest, ServerModePrintsWhatLocalModePrints) {
  ASSERT_TRUE(server_->Start());
  const std::string remote = absl::StrCat("--server ", server_->target());
  CliRun opt = Cli(absl::StrCat(remote, " optimize --shape 128x256x64 --shape 1024x512x256 --layout nt"));
  ASSERT_EQ(opt.code, 0) << opt.out;
  EXPECT_NE(opt.out.find("geomean speedup over the best baseline"), std::string::npos) << opt.out;
  CliRun jobs = Cli(absl::StrCat(remote, " jobs"));
  ASSERT_EQ(jobs.code, 0) << jobs.out;
  std::vector<std::string> rows = absl::StrSplit(jobs.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(rows.size(), 2u) << jobs.out;
  const std::string job_id = rows[1].substr(0, rows[1].find(' '));
  EXPECT_NE(rows[1].find("succeeded"), std::string::npos);
  // Watching the ended job prints the same summary the optimize call ended with.
  CliRun watch = Cli(absl::StrCat(remote, " watch ", job_id));
  ASSERT_EQ(watch.code, 0) << watch.out;
  EXPECT_EQ(Summary(watch.out), Summary(opt.out));
  EXPECT_FALSE(Summary(opt.out).empty()) << opt.out;
  // kernels: the server's answer and the store's, read here, are the same text.
  for (const std::string& args : {std::string("kernels"), std::string("kernels --figure warm"),
                                  absl::StrCat("kernels --job ", job_id)}) {
    CliRun local = Cli(absl::StrCat("--db ", db_, " ", args));
    CliRun served = Cli(absl::StrCat(remote, " ", args));
    ASSERT_EQ(local.code, 0) << local.out;
    ASSERT_EQ(served.code, 0) << served.out;
    EXPECT_EQ(served.out, local.out) << args;
    EXPECT_NE(local.out.find("FAKE-GPU"), std::string::npos) << local.out;
  }
  // --json: the same message (proto maps print in no fixed order, so compared as messages).
  CliRun local_json = Cli(absl::StrCat("--db ", db_, " --json kernels"));
  CliRun served_json = Cli(absl::StrCat(remote, " --json kernels"));
  v1::ListKernelsResponse a, b;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(local_json.out, &a).ok()) << local_json.out;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(served_json.out, &b).ok()) << served_json.out;
  EXPECT_EQ(a.kernels_size(), 2);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a, b));
  CliRun unknown = Cli(absl::StrCat(remote, " watch job-nope"));
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  CliRun no_store = Cli(absl::StrCat("--db ", dir_, "/none.db jobs"));  // no server: the store's jobs
  EXPECT_EQ(no_store.code, 4) << no_store.out;
}

// --gpu names the problems' device model: a server that measures on another
// refuses the job (UNAVAILABLE, exit 3) and stores nothing; its own model runs.
TEST_F(ServeCliTest, OptimizeForAGpuTheServerDoesNotHaveIsUnavailable) {
  ASSERT_TRUE(server_->Start());
  const std::string remote = absl::StrCat("--server ", server_->target());
  CliRun other = Cli(absl::StrCat(remote, " optimize --shape 128x256x64 --gpu B200"));
  EXPECT_EQ(other.code, 3) << other.out;
  EXPECT_NE(other.out.find("no evaluator for GPU B200"), std::string::npos) << other.out;
  CliRun jobs = Cli(absl::StrCat(remote, " jobs"));
  ASSERT_EQ(jobs.code, 0) << jobs.out;
  EXPECT_EQ(std::count(jobs.out.begin(), jobs.out.end(), '\n'), 1) << jobs.out;  // the header only
  CliRun own = Cli(absl::StrCat(remote, " optimize --shape 128x256x64 --gpu FAKE-GPU"));
  EXPECT_EQ(own.code, 0) << own.out;
}

// `anvil workers` against a server without the fleet says so (exit 3).
TEST_F(ServeCliTest, WorkersOfAServerWithoutAFleet) {
  ASSERT_TRUE(server_->Start());
  CliRun w = Cli(absl::StrCat("--server ", server_->target(), " workers"));
  EXPECT_EQ(w.code, 3) << w.out;
  EXPECT_NE(w.out.find("runs no fleet (fleet.enabled is off)"), std::string::npos) << w.out;
}

// export: the package written by the server (below its export.root) and by
// local mode from the same store print the same lines, and the same files.
TEST_F(ServeCliTest, ExportPrintsTheSameLocallyAndFromTheServer) {
  const std::string root = std::filesystem::weakly_canonical(dir_ + "/exports").string();
  std::filesystem::create_directories(root);
  ASSERT_TRUE(server_->Start({"--export-root", root}));
  const std::string remote = absl::StrCat("--server ", server_->target());
  ASSERT_EQ(Cli(absl::StrCat(remote, " optimize --shape 128x256x64 --shape 1024x512x256 --layout nt")).code, 0);
  for (const std::string& flags : {std::string(""), std::string("--json ")}) {
    CliRun served = Cli(absl::StrCat(remote, " ", flags, "export --gpu FAKE-GPU --out pkg"));
    ASSERT_EQ(served.code, 0) << served.out;
    const std::string manifest = dir_ + "/manifest.json";
    std::filesystem::copy_file(root + "/pkg/manifest.json", manifest,
                               std::filesystem::copy_options::overwrite_existing);
    CliRun local = Cli(absl::StrCat("--db ", db_, " ", flags, "export --gpu FAKE-GPU --out ", root, "/pkg"));
    ASSERT_EQ(local.code, 0) << local.out;
    EXPECT_EQ(served.out, local.out);
    EXPECT_NE(local.out.find(root + "/pkg"), std::string::npos) << local.out;
    std::ifstream a(manifest), b(root + "/pkg/manifest.json");
    std::stringstream sa, sb;
    sa << a.rdbuf();
    sb << b.rdbuf();
    EXPECT_EQ(sa.str(), sb.str()) << "the same store and options give the same package";
  }
  // Refusals keep local mode's exit codes: a bad argument is the user's (2).
  CliRun outside = Cli(absl::StrCat(remote, " export --gpu FAKE-GPU --out ../elsewhere"));
  EXPECT_EQ(outside.code, 2) << outside.out;
  CliRun no_margin = Cli(absl::StrCat(remote, " export --gpu FAKE-GPU --out pkg2 --margin 0.98"));
  CliRun no_margin_local =
      Cli(absl::StrCat("--db ", db_, " export --gpu FAKE-GPU --out ", root, "/pkg2 --margin 0.98"));
  EXPECT_EQ(no_margin.code, 2) << no_margin.out;
  EXPECT_EQ(no_margin_local.code, 2) << no_margin_local.out;
}

TEST_F(ServeCliTest, MetricsAreServedAsPrometheusText) {
  const int port = FreePort();
  ASSERT_TRUE(server_->Start({"--metrics-listen", absl::StrCat("127.0.0.1:", port)}));
  CliRun opt = Cli(absl::StrCat("--server ", server_->target(), " optimize --shape 128x128x128"));
  ASSERT_EQ(opt.code, 0) << opt.out;
  const std::string text = HttpGet(absl::StrCat("http://127.0.0.1:", port, "/metrics"));
  for (const char* want : {"anvil_jobs{state=\"succeeded\"} 1", "anvil_job_queue_depth 0",
                           "anvil_candidates_built_total{outcome=\"ok\"} 6",  // the re-checks reuse the winner's build
                           "anvil_candidates_measured_total{verdict=\"passed\"}",
                           "anvil_measure_seconds_bucket", "anvil_build_seconds_count 6",
                           "anvil_reward_count", "anvil_store_bytes",
                           "anvil_rpcs_total{code=\"OK\",method=\"OptimizeKernel\"} 1",
                           "anvil_coordinator_overhead_seconds_total", "anvil_evaluator_wait_seconds_total"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  // The coordinator's overhead is measured per candidate sent to the evaluator:
  // the six built and measured, and the winner's re-checks.
  const std::string counted = "\nanvil_coordinator_candidates_total ";
  const size_t at = text.find(counted);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GE(std::stod(text.substr(at + counted.size())), 7) << text;
}

TEST_F(ServeCliTest, StatusPageOnTheMetricsPortNeedsTheToken) {
  const int port = FreePort();
  ASSERT_TRUE(server_->Start({"--metrics-listen", absl::StrCat("127.0.0.1:", port)},
                             {{"ANVIL_AUTH_TOKEN", "correct horse"}}));
  const std::string base = absl::StrCat("http://127.0.0.1:", port);
  long code = 0;
  HttpGet(base + "/status", &code);
  EXPECT_EQ(code, 401);
  HttpGet(base + "/status.json?token=battery", &code);
  EXPECT_EQ(code, 401);
  const std::string page = HttpGet(base + "/status?token=correct%20horse", &code);
  EXPECT_EQ(code, 200);
  EXPECT_NE(page.find("<title>Anvil status</title>"), std::string::npos);
  const std::string model = HttpGet(base + "/status.json?token=correct+horse", &code);
  EXPECT_EQ(code, 200);
  EXPECT_NE(model.find("\"jobs\":[]"), std::string::npos) << model;
  HttpGet(base + "/metrics", &code);
  EXPECT_EQ(code, 200);  // Prometheus scrapes without the token, as before
  HttpGet(base + "/nothing", &code);
  EXPECT_EQ(code, 404);
}

// The real `anvil serve` (not the test server): its own flags after the
// subcommand, and the HTTP port's threads start in a process that links the
// whole CLI (cuBLASLt's static TLS did not fit civetweb's 100 KiB stacks).
TEST_F(ServeCliTest, AnvilServeServesStatusAndMetricsOnOnePort) {
  const std::string script = dir_ + "/anvil-serve.sh";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\nexec " << ANVIL_CLI << " serve \"$@\"\n";
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  ServerProcess real(script, db_, dir_);
  const int port = FreePort();
  ASSERT_TRUE(real.Start({"--metrics-listen", absl::StrCat("127.0.0.1:", port)})) << real.log(1);
  const std::string base = absl::StrCat("http://127.0.0.1:", port);
  long code = 0;
  const std::string page = HttpGet(base + "/status", &code);
  EXPECT_EQ(code, 200) << real.log(1);
  EXPECT_NE(page.find("<title>Anvil status</title>"), std::string::npos);
  EXPECT_NE(HttpGet(base + "/metrics", &code).find("anvil_jobs"), std::string::npos);
  EXPECT_EQ(code, 200);
}

TEST_F(ServeCliTest, TlsWhenGivenACertificate) {
  if (std::system("openssl version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl command here";
  const std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  ASSERT_EQ(std::system(absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                                     "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ", key,
                                     " -out ", cert, " > /dev/null 2>&1").c_str()), 0);
  ASSERT_TRUE(server_->Start({"--tls-cert-file", cert, "--tls-key-file", key}));
  CliRun tls = Cli(absl::StrCat("--server ", server_->target(), " --tls-ca ", cert, " jobs"));
  EXPECT_EQ(tls.code, 0) << tls.out;
  CliRun plain = Cli(absl::StrCat("--server ", server_->target(), " jobs"));
  EXPECT_EQ(plain.code, 3) << plain.out;  // UNAVAILABLE: no plaintext on a TLS port
}

TEST_F(ServeCliTest, BadConfigurationStopsTheServerWithExitTwo) {
  const std::string bad = dir_ + "/bad.toml";
  FILE* f = fopen(bad.c_str(), "w");
  fputs("[server]\nlisten = 50051\n", f);
  fclose(f);
  EXPECT_FALSE(server_->Start({"--config", bad}));
  EXPECT_NE(server_->log(1).find("server.listen must be a string"), std::string::npos) << server_->log(1);
}

// With the server down, `anvil jobs` and `anvil cancel` work on the store
// itself; with it up, the offline cancel is refused (one writer per store)
// and says how to cancel through the server.
TEST_F(ServeCliTest, JobsAndCancelWithoutAServer) {
  ASSERT_TRUE(server_->Start({}, {{"ANVIL_TEST_MEASURE_MS", "300"}, {"ANVIL_TEST_CANDIDATES", "30"}}));
  CliRun detach = Cli(absl::StrCat("--server ", server_->target(), " optimize --shape 128x256x64 --layout nt --detach"));
  ASSERT_EQ(detach.code, 0) << detach.out;
  const std::string job = std::string(absl::StripAsciiWhitespace(detach.out.substr(detach.out.rfind("job-"))));
  const std::string job_id = job.substr(0, job.find_first_of(" \n"));
  CliRun refused = Cli(absl::StrCat("--db ", db_, " cancel ", job_id));
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("another process writes the store"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("anvil --server HOST:PORT cancel " + job_id), std::string::npos) << refused.out;
  server_->Kill(SIGKILL);
  server_->Wait(std::chrono::seconds(10));
  CliRun listed = Cli(absl::StrCat("--db ", db_, " jobs"));
  ASSERT_EQ(listed.code, 0) << listed.out;
  EXPECT_NE(listed.out.find(job_id + " "), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("running"), std::string::npos) << listed.out;
  CliRun cancelled = Cli(absl::StrCat("--db ", db_, " cancel ", job_id));
  ASSERT_EQ(cancelled.code, 0) << cancelled.out;
  EXPECT_NE(cancelled.out.find(job_id + " cancelled"), std::string::npos) << cancelled.out;
  CliRun again = Cli(absl::StrCat("--db ", db_, " cancel ", job_id));
  EXPECT_EQ(again.code, 2) << again.out;
  EXPECT_NE(again.out.find("has ended"), std::string::npos) << again.out;
  // The next server does not resume it.
  ASSERT_TRUE(server_->Start());
  CliRun remote = Cli(absl::StrCat("--server ", server_->target(), " jobs --state cancelled"));
  EXPECT_NE(remote.out.find(job_id), std::string::npos) << remote.out;
}

// `anvil serve --help` is serve's own help (its options), not the CLI's.
TEST_F(ServeCliTest, ServeHelpListsServeOptions) {
  CliRun help = Cli("serve --help");
  EXPECT_EQ(help.code, 0) << help.out;
  EXPECT_NE(help.out.find("--fleet-enabled"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--server-listen"), std::string::npos) << help.out;
  CliRun worker = Cli("worker --help");
  EXPECT_EQ(worker.code, 0) << worker.out;
  EXPECT_NE(worker.out.find("--build-slots"), std::string::npos) << worker.out;
}

// A non-loopback address without a token is refused (exit 2) unless asked
// for by name; with a token, plaintext off loopback is warned about.
TEST_F(ServeCliTest, NonLoopbackWithoutATokenIsRefused) {
  ServerProcess open_server(ANVIL_TEST_SERVER, db_, dir_);
  open_server.SetListen("0.0.0.0:0");
  EXPECT_FALSE(open_server.Start());
  EXPECT_NE(open_server.log(1).find("without a bearer token"), std::string::npos) << open_server.log(1);
  ASSERT_TRUE(open_server.Start({}, {{"ANVIL_AUTH_TOKEN", "s3cret"}})) << open_server.log(2);
  EXPECT_NE(open_server.log(2).find("speaks PLAINTEXT"), std::string::npos) << open_server.log(2);
  open_server.Kill(SIGTERM);
  EXPECT_EQ(open_server.Wait(std::chrono::seconds(20)), 0);
  ASSERT_TRUE(open_server.Start({"--auth-allow-unauthenticated", "true"})) << open_server.log(3);
  EXPECT_NE(open_server.log(3).find("WITHOUT AUTHENTICATION"), std::string::npos) << open_server.log(3);
}

// One writer per store: a second server on the same file stops at start.
TEST_F(ServeCliTest, ASecondServerOnTheSameStoreIsRefused) {
  ASSERT_TRUE(server_->Start());
  ServerProcess second(ANVIL_TEST_SERVER, db_, dir_ + "/second");
  std::filesystem::create_directories(dir_ + "/second");
  EXPECT_FALSE(second.Start());
  EXPECT_NE(second.log(1).find("another process writes the store"), std::string::npos) << second.log(1);
}

}  // namespace
}  // namespace anvil
