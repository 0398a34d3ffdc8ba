// Namespace isolation: network, filesystem, processes, uid. Every test skips,
// saying why, where the kernel refuses namespaces (e.g. in a container).
#include <arpa/inet.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sandbox/test_util.h"

namespace anvil::sandbox {
namespace {

using testing::HelperSpec;
using testing::ShellSpec;

// A TCP listener on 127.0.0.1 of the host's network namespace.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && listen(fd_, 16) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~Listener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(IsolationTest, ReportsItsProtections) {
  ANVIL_SKIP_WITHOUT_NAMESPACES();
  ScratchDir dir = testing::MakeScratch();
  absl::StatusOr<Result> r = sandbox::Run(ShellSpec(dir.path(), "true", Isolation::kNamespaces));
  ASSERT_TRUE(r.ok()) << r.status();
  for (const char* p : {"user_ns", "net_ns", "mount_ns", "pid_ns"}) {
    EXPECT_NE(std::find(r->protections.begin(), r->protections.end(), p), r->protections.end())
        << p;
  }
  EXPECT_TRUE(r->isolation_fallback.empty());
}

TEST(IsolationTest, HostLoopbackIsUnreachableWithoutNetwork) {
  ANVIL_SKIP_WITHOUT_NAMESPACES();
  Listener listener;
  ASSERT_GT(listener.port(), 0);
  ScratchDir dir = testing::MakeScratch();
  const std::string port = std::to_string(listener.port());
  absl::StatusOr<Result> control = sandbox::Run(HelperSpec(dir.path(), {"connect", port}, Isolation::kNone));
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_EQ(control->stdout_text, "connect=ok\n") << "control: the listener must be reachable";
  absl::StatusOr<Result> r = sandbox::Run(HelperSpec(dir.path(), {"connect", port}, Isolation::kNamespaces));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "connect=ECONNREFUSED\n") << r->stderr_text;
  Spec shared = HelperSpec(dir.path(), {"connect", port}, Isolation::kNamespaces);
  shared.network = true;
  r = sandbox::Run(shared);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "connect=ok\n") << "network = true shares the host network";
}

TEST(IsolationTest, FilesystemIsNarrowAndReadOnlyOutsideWorkDir) {
  ANVIL_SKIP_WITHOUT_NAMESPACES();
  ScratchDir outside = testing::MakeScratch("anvil-secret-");
  const std::string secret = outside.path() + "/secret.txt";
  std::ofstream(secret) << "top secret\n";
  ScratchDir dir = testing::MakeScratch();
  const std::string script =
      "for p in " + secret + " /root /home /var /etc/shadow /etc/hostname; do "
      "  if [ -e $p ]; then echo visible=$p; fi; done; "
      "for p in " + outside.path() + "/new /usr/new /etc/new /new; do "
      "  if (echo x > $p) 2>/dev/null; then echo written=$p; fi; done; "
      "echo x > /tmp/anvil-sandbox-tmp-probe && echo tmp=ok; "
      "echo x > in-work && echo work=ok";
  absl::StatusOr<Result> r = sandbox::Run(ShellSpec(dir.path(), script, Isolation::kNamespaces));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "tmp=ok\nwork=ok\n") << r->stderr_text;
  EXPECT_EQ(access((outside.path() + "/new").c_str(), F_OK), -1);
  EXPECT_EQ(access((dir.path() + "/in-work").c_str(), F_OK), 0) << "work_dir is writable";
  EXPECT_NE(access("/tmp/anvil-sandbox-tmp-probe", F_OK), 0) << "/tmp inside is private";
}

TEST(IsolationTest, BindsWorkThroughSymlinks) {
  ANVIL_SKIP_WITHOUT_NAMESPACES();
  ScratchDir real = testing::MakeScratch("anvil-real-");
  chmod(real.path().c_str(), 0755);
  std::ofstream(real.path() + "/data") << "through the link\n";
  ScratchDir links = testing::MakeScratch("anvil-links-");
  chmod(links.path().c_str(), 0755);
  const std::string link = links.path() + "/toolchain";
  ASSERT_EQ(symlink(real.path().c_str(), link.c_str()), 0);
  ScratchDir dir = testing::MakeScratch();
  Spec s = ShellSpec(dir.path(), "cat " + link + "/data", Isolation::kNamespaces);
  s.binds.push_back({link, "", false});
  if (access("/usr/local/cuda/bin", F_OK) == 0) {  // a symlink on most CUDA installs
    s.binds.push_back({"/usr/local/cuda", "", false});
    s.argv[2] += " && test -d /usr/local/cuda/bin";
  }
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  EXPECT_EQ(r->stdout_text, "through the link\n");
}

TEST(IsolationTest, OtherProcessesAreInvisible) {
  ANVIL_SKIP_WITHOUT_NAMESPACES();
  ScratchDir dir = testing::MakeScratch();
  absl::StatusOr<Result> r = sandbox::Run(ShellSpec(
      dir.path(), "ls /proc | grep -c '^[0-9]'; id -u", Isolation::kNamespaces));
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> lines = absl::StrSplit(r->stdout_text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << r->stdout_text << r->stderr_text;
  EXPECT_LE(std::stoi(lines[0]), 5) << "only the job's own processes";
  EXPECT_NE(lines[1], "0") << "the job is not root, even inside";
}

TEST(IsolationTest, GpuJobsStartWithoutAGpu) {
  ANVIL_SKIP_WITHOUT_NAMESPACES();
  ScratchDir dir = testing::MakeScratch();
  Spec s = ShellSpec(dir.path(), "test -d /sys/class && ls /dev | grep -c nvidia; true",
                     Isolation::kNamespaces);
  s.gpu = true;
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
}

}  // namespace
}  // namespace anvil::sandbox
