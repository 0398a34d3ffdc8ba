// report_test_fixture: the browser test's helper (test code only).
//   report_test_fixture write DB            writes the test search into DB
//   report_test_fixture serve DB PORTFILE   serves the status page of DB on
//       127.0.0.1 (a free port, written to PORTFILE) with a minimal HTTP/1.0
//       server (StatusPageTestServer) while the test job progresses one
//       measurement a second. $ANVIL_TEST_TOKEN, when set, is the token.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "report/report_test_store.h"
#include "report/status.h"

namespace anvil::report {
namespace {

std::atomic<int64_t> g_clock{0};

std::unique_ptr<Store> OpenOrExit(const std::string& path) {
  StoreOptions options;
  options.now_unix_ms = [] { return g_clock.load(); };
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, options);
  if (!store.ok()) {
    std::cerr << "report_test_fixture: " << store.status() << "\n";
    std::exit(1);
  }
  return *std::move(store);
}

StatusRequest ParseRequest(const std::string& head) {
  StatusRequest r;
  std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
  std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
  if (first.size() >= 2) {
    r.method = first[0];
    std::pair<std::string, std::string> target = absl::StrSplit(first[1], absl::MaxSplits('?', 1));
    r.path = target.first;
    r.query = target.second;
  }
  for (const std::string& line : lines) {
    if (absl::StartsWithIgnoreCase(line, "authorization:")) {
      r.authorization = std::string(absl::StripAsciiWhitespace(line.substr(14)));
    }
  }
  return r;
}

// StatusPageTestServer: one connection at a time, HTTP/1.0, Connection: close.
void Serve(int listener, Store& store, const std::string& token) {
  auto snapshot = [] {
    StatusSnapshot s;
    s.now_unix_ms = g_clock.load();
    return s;
  };
  while (true) {
    int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) continue;
    std::string head;
    char buf[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) break;
      head.append(buf, static_cast<size_t>(n));
    }
    StatusResponse r = HandleStatusRequest(ParseRequest(head), store, snapshot, BearerToken(token));
    if (!r.handled) r.body = "not found\n";
    std::string out = absl::StrCat("HTTP/1.0 ", r.code, " X\r\nContent-Type: ", r.content_type,
                                   "\r\nContent-Length: ", r.body.size(),
                                   "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n", r.body);
    for (size_t sent = 0; sent < out.size();) {
      ssize_t n = write(fd, out.data() + sent, out.size() - sent);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    close(fd);
  }
}

int RunServe(const std::string& db, const std::string& port_file) {
  std::unique_ptr<Store> store = OpenOrExit(db);
  if (store->ListJobs(1)->empty()) {
    if (absl::Status st = testing::WriteTestSearch(*store, g_clock); !st.ok()) return 1;
  } else {
    g_clock = testing::kTestStart + 400'000;
  }
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 16) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::cerr << "report_test_fixture: cannot listen on 127.0.0.1\n";
    return 1;
  }
  std::ofstream(port_file) << ntohs(addr.sin_port) << "\n";
  std::thread progress([&store] {
    for (int step = 0;; ++step) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      (void)testing::ProgressTestJob(*store, g_clock, step);
    }
  });
  progress.detach();
  const char* token = std::getenv("ANVIL_TEST_TOKEN");
  Serve(listener, *store, token ? token : "");
  return 0;
}

}  // namespace
}  // namespace anvil::report

int main(int argc, char** argv) {
  using namespace anvil::report;
  const std::string mode = argc > 2 ? argv[1] : "";
  if (mode == "write") {
    std::unique_ptr<anvil::Store> store = OpenOrExit(argv[2]);
    absl::Status st = testing::WriteTestSearch(*store, g_clock);
    if (!st.ok()) std::cerr << "report_test_fixture: " << st << "\n";
    return st.ok() ? 0 : 1;
  }
  if (mode == "serve" && argc > 3) return RunServe(argv[2], argv[3]);
  std::cerr << "usage: report_test_fixture write DB | serve DB PORTFILE\n";
  return 2;
}
