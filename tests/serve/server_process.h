// ServerProcess: a real anvil_test_server process for end-to-end tests,
// bound to 127.0.0.1:0 (the port read back from its port file), with its own
// store, killed or terminated on demand. Test-only. Thread-compatible.
#ifndef ANVIL_TESTS_SERVE_SERVER_PROCESS_H_
#define ANVIL_TESTS_SERVE_SERVER_PROCESS_H_

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace anvil::testing_serve {

class ServerProcess {
 public:
  // REQUIRES: db and dir are paths this test owns.
  ServerProcess(std::string binary, std::string db, std::string dir)
      : binary_(std::move(binary)), db_(std::move(db)), dir_(std::move(dir)) {}
  ~ServerProcess() {
    if (pid_ > 0) Kill(SIGKILL);
  }

  // Starts it and waits until it serves (its port file appears). false on failure.
  bool Start(const std::vector<std::string>& extra = {}, const std::map<std::string, std::string>& env = {}) {
    port_file_ = absl::StrCat(dir_, "/port.", ++starts_);
    unlink(port_file_.c_str());
    std::vector<std::string> args = {binary_, "--server-listen", listen_, "--server-db", db_,
                                     "--server-port-file", port_file_, "--server-drain-seconds", "10"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      freopen(absl::StrCat(dir_, "/server.", starts_, ".log").c_str(), "w", stderr);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary_.c_str(), argv.data());
      _exit(127);
    }
    for (int i = 0; i < 3000; ++i) {  // 30 s
      std::ifstream in(port_file_);
      if (in >> port_) return true;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  void Kill(int sig) { kill(pid_, sig); }

  // Waits for the process to exit; returns its exit code (128 + signal when
  // killed, -1 after `timeout`), and how long it took.
  int Wait(std::chrono::milliseconds timeout, double* seconds = nullptr) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < timeout) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string log(int start) const {
    std::ifstream in(absl::StrCat(dir_, "/server.", start, ".log"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  int starts() const { return starts_; }
  // Later starts listen on the port this one got (clients reconnect to it).
  void KeepPort() { listen_ = target(); }
  // Later starts listen on this host:port.
  void SetListen(std::string listen) { listen_ = std::move(listen); }

 private:
  std::string binary_, db_, dir_, port_file_;
  std::string listen_ = "127.0.0.1:0";
  pid_t pid_ = -1;
  int port_ = 0;
  int starts_ = 0;
};

}  // namespace anvil::testing_serve

#endif  // ANVIL_TESTS_SERVE_SERVER_PROCESS_H_
