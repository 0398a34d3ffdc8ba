// Probe: what isolation this node allows (bwrap namespaces, cgroup v2), and
// the driver library directories. See sandbox.h and SANDBOX.md.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "deploy/layout.h"
#include "sandbox/internal.h"
#include "spdlog/spdlog.h"

namespace anvil::sandbox {
namespace internal {
namespace {

std::string FindExecutable(const char* env_var, std::initializer_list<const char*> places) {
  if (const char* v = env_var != nullptr ? getenv(env_var) : nullptr; v != nullptr && *v) {
    return access(v, X_OK) == 0 ? std::string(v) : std::string();
  }
  for (const char* p : places) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

bool EnvFlag(const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

std::string TempRoot() {
  const char* t = getenv("TMPDIR");
  return t != nullptr && *t == '/' ? std::string(t) : std::string("/tmp");
}

// The cgroup v2 directory this process is in, e.g. /sys/fs/cgroup/user.slice/x.
// Sets *mount to the cgroup2 mount point. Empty when there is no cgroup v2.
std::string OwnCgroupDir(std::string* mount) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line, root;
  while (mount->empty() && std::getline(mountinfo, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    for (size_t i = 6; i + 1 < f.size(); ++i) {
      if (f[i] == "-" && f[i + 1] == "cgroup2") {
        root = f[3];
        *mount = f[4];
      }
    }
  }
  std::ifstream self("/proc/self/cgroup");
  while (!mount->empty() && std::getline(self, line)) {
    if (!absl::StartsWith(line, "0::")) continue;
    std::string own = line.substr(3);
    if (root != "/" && absl::StartsWith(own, root)) own = own.substr(root.size());
    return own == "/" ? *mount : *mount + own;
  }
  return "";
}

// Can a child process join a fresh cgroup under dir? Also: cgroup.kill, memory.
bool TryCgroupParent(const std::string& dir, bool* kill, bool* memory, std::string* why) {
  const std::string test = absl::StrCat(dir, "/anvil-probe-", getpid());
  if (mkdir(test.c_str(), 0755) != 0) {
    *why = absl::StrCat("cannot create a cgroup under ", dir, ": ", strerror(errno));
    return false;
  }
  const std::string procs = test + "/cgroup.procs";
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    _exit(fd >= 0 && write(fd, "0", 1) == 1 ? 0 : 1);
  }
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *kill = access((test + "/cgroup.kill").c_str(), F_OK) == 0;
  *memory = access((test + "/memory.max").c_str(), W_OK) == 0;
  rmdir(test.c_str());
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why = absl::StrCat("cannot move a process into a cgroup under ", dir);
    return false;
  }
  if (!*memory) *why = absl::StrCat("no memory controller delegated to ", dir);
  return true;
}

void ProbeCgroups(Capabilities* caps, std::vector<std::string>* why_not) {
  if (EnvFlag("ANVIL_SANDBOX_NO_CGROUPS")) {
    why_not->push_back("cgroups: disabled by ANVIL_SANDBOX_NO_CGROUPS");
    return;
  }
  std::string mount;
  const std::string own = OwnCgroupDir(&mount);
  if (own.empty()) {
    why_not->push_back("cgroups: no cgroup v2 hierarchy mounted");
    return;
  }
  std::vector<std::string> candidates = {own};
  if (const char* env = getenv("ANVIL_SANDBOX_CGROUP"); env != nullptr && *env) {
    candidates = {env};
  } else if (own != mount && geteuid() == 0) {
    candidates.push_back(mount);  // root on a systemd host: a top-level cgroup
  }
  std::string why;
  for (const std::string& dir : candidates) {
    bool kill = false, memory = false;
    if (!TryCgroupParent(dir, &kill, &memory, &why)) continue;
    if (!caps->cgroup_kill || memory) {
      caps->cgroup_kill = true;
      caps->cgroup_parent = dir;
      caps->cgroups = memory;
    }
    if (memory) return;
  }
  why_not->push_back(absl::StrCat("cgroups: ", why,
                                  " (set ANVIL_SANDBOX_CGROUP to a delegated cgroup)"));
}

std::string FirstLine(const std::string& text) {
  const std::string line = text.substr(0, text.find('\n'));
  return line.empty() ? std::string("(no output)") : line;
}

void ProbeNamespaces(const std::string& bwrap, Capabilities* caps,
                     std::vector<std::string>* why_not) {
  FindBwrap(bwrap, caps);
  const std::string true_path = FindExecutable(nullptr, {"/usr/bin/true", "/bin/true"});
  if (caps->bwrap_path.empty() || true_path.empty()) {
    why_not->push_back(caps->bwrap_path.empty()
                           ? "namespaces: bubblewrap (bwrap) not found (neither in this program's bundle "
                             "nor in /usr/bin; install the bubblewrap package)"
                           : "namespaces: /usr/bin/true not found");
    return;
  }
  absl::StatusOr<ScratchDir> dir = ScratchDir::Create(TempRoot(), "anvil-probe-");
  if (!dir.ok()) {
    why_not->push_back(absl::StrCat("namespaces: ", dir.status().message()));
    return;
  }
  Spec probe;
  probe.argv = {true_path};
  probe.work_dir = dir->path();
  probe.isolation = Isolation::kNamespaces;
  probe.limits.wall_time = absl::Seconds(20);
  Capabilities trial = *caps;
  trial.namespaces = true;
  absl::StatusOr<Result> r = RunWith(probe, trial);
  if (r.ok() && r->exit_code == 0) {
    caps->namespaces = true;
    return;
  }
  if (!r.ok()) {
    why_not->push_back(absl::StrCat("namespaces: bwrap refused: ", r.status().ToString()));
    return;
  }
  const std::string cause =
      DiagnoseNamespaces(GatherNamespaceFacts(r->stderr_text, caps->bwrap_path));
  const std::string said = FirstLine(r->stderr_text);
  const char* stop = cause.empty() ? "" : absl::EndsWith(said, ".") ? " " : ". ";
  why_not->push_back(absl::StrCat("namespaces: bwrap refused: ", said, stop, cause));
}

}  // namespace

// The bubblewrap to use: the caller's, $ANVIL_SANDBOX_BWRAP, the one of the
// bundle this program belongs to (deploy/layout.h), else the system's; and
// whether it knows --disable-userns.
void FindBwrap(const std::string& given, Capabilities* caps) {
  const char* env = getenv("ANVIL_SANDBOX_BWRAP");
  if (!given.empty()) {
    caps->bwrap_path = given;
    caps->bwrap_found_by = "caller";
  } else if (env != nullptr && *env != '\0') {
    caps->bwrap_path = FindExecutable("ANVIL_SANDBOX_BWRAP", {});
    caps->bwrap_found_by = "ANVIL_SANDBOX_BWRAP";
  } else if (const std::string own = deploy::Installed("bin/bwrap");
             !own.empty() && access(own.c_str(), X_OK) == 0) {
    caps->bwrap_path = own;
    caps->bwrap_found_by = "bundle";
  } else {
    caps->bwrap_path = FindExecutable(nullptr, {"/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"});
    caps->bwrap_found_by = "system";
  }
  if (caps->bwrap_path.empty()) return;
  Spec help;
  help.argv = {caps->bwrap_path, "--help"};
  help.work_dir = "/";
  help.isolation = Isolation::kNone;
  help.run_as_uid = geteuid();  // as the caller: "/" must never change owner
  help.run_as_gid = getegid();
  help.limits.wall_time = absl::Seconds(10);
  absl::StatusOr<Result> h = RunWith(help, *caps);
  caps->bwrap_disable_userns = h.ok() && absl::StrContains(h->stdout_text, "--disable-userns");
}

Capabilities ProbeUncached(const ProbeOptions& options) {
  Capabilities caps;
  std::vector<std::string> why_not;
  caps.prlimit_path = FindExecutable(nullptr, {"/usr/bin/prlimit", "/bin/prlimit"});
  if (options.skip_cgroups) {
    why_not.push_back("cgroups: skipped");
  } else {
    ProbeCgroups(&caps, &why_not);
  }
  if (options.skip_namespaces || EnvFlag("ANVIL_SANDBOX_NO_NAMESPACES")) {
    why_not.push_back("namespaces: disabled");
  } else {
    ProbeNamespaces(options.bwrap_path, &caps, &why_not);
  }
  caps.why_not = absl::StrJoin(why_not, "; ");
  return caps;
}

const std::vector<std::string>& DriverLibraryDirs() {
  static const std::vector<std::string>* dirs = [] {
    auto* out = new std::vector<std::string>();
    const std::string ldconfig = FindExecutable(nullptr, {"/sbin/ldconfig", "/usr/sbin/ldconfig"});
    if (ldconfig.empty()) return out;
    Spec spec;
    spec.argv = {ldconfig, "-p"};
    spec.work_dir = "/";
    spec.isolation = Isolation::kNone;
    spec.run_as_uid = geteuid();  // as the caller: "/" must never change owner
    spec.run_as_gid = getegid();
    spec.limits.wall_time = absl::Seconds(10);
    absl::StatusOr<Result> r = RunWith(spec, Capabilities());
    if (!r.ok()) return out;
    std::set<std::string> unique;
    for (absl::string_view line : absl::StrSplit(r->stdout_text, '\n')) {
      const size_t arrow = line.find("=> ");
      const std::string name(absl::StripLeadingAsciiWhitespace(line.substr(0, line.find(' ', 1))));
      if (arrow == absl::string_view::npos) continue;
      if (!absl::StartsWith(name, "libcuda.so") && !absl::StartsWith(name, "libnvidia-")) continue;
      const std::string path(line.substr(arrow + 3));
      unique.insert(path.substr(0, path.rfind('/')));
      char real[PATH_MAX];
      if (realpath(path.c_str(), real) != nullptr) {
        const std::string r2(real);
        unique.insert(r2.substr(0, r2.rfind('/')));
      }
    }
    out->assign(unique.begin(), unique.end());
    return out;
  }();
  return *dirs;
}

}  // namespace internal

const Capabilities& Probe() {
  static const Capabilities* caps = [] {
    auto* c = new Capabilities(internal::ProbeUncached({}));
    spdlog::info("sandbox: namespaces {}, cgroup kill {}, cgroup memory {}{}{}",
                 c->namespaces ? "yes" : "no", c->cgroup_kill ? "yes" : "no",
                 c->cgroups ? "yes" : "no", c->why_not.empty() ? "" : ": ", c->why_not);
    return c;
  }();
  return *caps;
}

}  // namespace anvil::sandbox
