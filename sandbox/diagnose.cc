// Why bubblewrap could not make its namespaces here, and what fixes it. The
// probe records bwrap's complaint; this names the setting behind it (a masked
// /proc, a sysctl, AppArmor, a seccomp filter) and the change that lifts it.
// See SANDBOX.md, "Running under a service manager or container runtime".
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sandbox/internal.h"

namespace anvil::sandbox::internal {
namespace {

constexpr char kUnmaskProc[] =
    "Kubernetes: securityContext.procMount: Unmasked with spec.hostUsers: false "
    "(deploy/k8s/worker.yaml); docker: --security-opt systempaths=unconfined; podman: "
    "--security-opt unmask=ALL";
constexpr char kUnconfineSeccomp[] =
    "Kubernetes: securityContext.seccompProfile: Unconfined (deploy/k8s/worker.yaml); "
    "docker or podman: --security-opt seccomp=unconfined";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Sysctl(const NamespaceFacts& f, const std::string& name) {
  auto it = f.sysctls.find(name);
  return it == f.sysctls.end() ? "" : it->second;
}

// mountinfo escapes blanks and backslashes in paths as octal (\040).
std::string Unescape(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool octal = s[i] == '\\' && i + 3 < s.size() &&
                       std::all_of(s.begin() + i + 1, s.begin() + i + 4,
                                   [](char c) { return c >= '0' && c <= '7'; });
    if (!octal) {
      out += s[i];
      continue;
    }
    out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
    i += 3;
  }
  return out;
}

std::string SystemdFix(const NamespaceFacts& f, absl::string_view settings) {
  return absl::StrCat("systemd: remove ", settings, " from the unit",
                      f.systemd_unit.empty() ? "" : absl::StrCat(" (", f.systemd_unit, ")"),
                      "; deploy/systemd/anvil-worker.service keeps only settings the sandbox "
                      "works under");
}

// The fixes for a setting that could come from the service manager or from a
// container runtime: the one this process is under, else both.
std::string EitherFix(const NamespaceFacts& f, const std::string& systemd, const std::string& container) {
  if (f.systemd_service && !f.container) return systemd;
  if (f.container && !f.systemd_service) return container;
  return absl::StrCat(systemd, "; ", container);
}

std::string MaskedProc(const NamespaceFacts& f, const std::vector<std::string>& masks) {
  std::vector<std::string> shown(masks.begin(), masks.begin() + std::min<size_t>(masks.size(), 4));
  std::string list = absl::StrJoin(shown, ", ");
  if (masks.size() > shown.size()) absl::StrAppend(&list, " and ", masks.size() - shown.size(), " more");
  std::vector<std::string> fixes;
  if (absl::c_any_of(masks, [](const std::string& m) { return absl::StartsWith(m, "/proc/driver/nvidia"); })) {
    fixes.push_back("the NVIDIA container toolkit's legacy mode mounts a tmpfs over /proc/driver/nvidia: "
                    "switch the toolkit to CDI mode");
  }
  fixes.push_back(EitherFix(
      f, SystemdFix(f, "ProtectKernelTunables=, ProtectKernelLogs= and ProtectHostname="), kUnmaskProc));
  return absl::StrCat(
      "/proc is masked: ", list, " ", masks.size() == 1 ? "is" : "are",
      " mounted over part of it (read-only or hidden), and the kernel lets a user namespace mount "
      "a fresh /proc only while the /proc it sees has no such mounts (fs/namespace.c, "
      "mount_too_revealing). Fix: ", absl::StrJoin(fixes, "; "));
}

std::string AppArmorUserns(const NamespaceFacts& f) {
  const std::string bwrap = f.bwrap_path.empty() ? "/path/to/bwrap" : f.bwrap_path;
  return absl::StrCat(
      "AppArmor restricts unprivileged user namespaces here (kernel.apparmor_restrict_unprivileged_userns "
      "is 1): bubblewrap gets no capabilities in the namespaces it makes. Fix: load a profile that "
      "lets it make them, e.g. /etc/apparmor.d/anvil-bwrap holding the lines `abi <abi/4.0>,`, "
      "`include <tunables/global>` and `profile anvil-bwrap ", bwrap,
      " flags=(unconfined) { userns, }`, then `apparmor_parser -r /etc/apparmor.d/anvil-bwrap`; or "
      "set the sysctl to 0 (/etc/sysctl.d/)");
}

bool Refused(absl::string_view err) {
  return absl::StrContains(err, "Operation not permitted") || absl::StrContains(err, "Permission denied");
}

// Namespace creation itself refused: by a sysctl, AppArmor, or a seccomp filter.
std::string NamespacesRefused(const NamespaceFacts& f) {
  if (Sysctl(f, "user.max_user_namespaces") == "0") {
    return "user namespaces are switched off: user.max_user_namespaces is 0. Fix: set it to e.g. 15000 "
           "(`sysctl -w user.max_user_namespaces=15000`, and in /etc/sysctl.d/ to keep it)";
  }
  if (Sysctl(f, "kernel.unprivileged_userns_clone") == "0") {
    return "the kernel refuses user namespaces to unprivileged users: kernel.unprivileged_userns_clone "
           "is 0. Fix: `sysctl -w kernel.unprivileged_userns_clone=1`, and in /etc/sysctl.d/ to keep it";
  }
  if (Sysctl(f, "kernel.apparmor_restrict_unprivileged_userns") == "1") return AppArmorUserns(f);
  if (absl::StrContains(f.status, "Seccomp:\t2")) {
    return absl::StrCat(
        "a seccomp filter on this process refuses clone()/unshare() of new namespaces. Fix: ",
        EitherFix(f, SystemdFix(f, "RestrictNamespaces= and SystemCallFilter="), kUnconfineSeccomp));
  }
  return "";
}

// Mounting refused after the namespaces were made: an LSM or a seccomp filter.
std::string MountsRefused(const NamespaceFacts& f, absl::string_view err) {
  if (Sysctl(f, "kernel.apparmor_restrict_unprivileged_userns") == "1") return AppArmorUserns(f);
  if (absl::StrContains(err, "Permission denied")) {
    return "a security module refuses bubblewrap's mounts (a container runtime's default AppArmor "
           "profile denies mount; SELinux may too). Fix: Kubernetes: securityContext.appArmorProfile: "
           "Unconfined (deploy/k8s/worker.yaml); docker or podman: --security-opt apparmor=unconfined";
  }
  return absl::StrCat("a seccomp filter refuses mount() or pivot_root(). Fix: ",
                      EitherFix(f, SystemdFix(f, "SystemCallFilter="), kUnconfineSeccomp));
}

}  // namespace

std::vector<std::string> ProcOvermounts(absl::string_view mountinfo) {
  std::vector<std::string> points, procs;  // every mount point; those of proc mounts
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() < 5) continue;
    points.push_back(Unescape(f[4]));
    const auto dash = std::find(f.begin(), f.end(), "-");
    if (dash != f.end() && dash + 1 != f.end() && *(dash + 1) == "proc") procs.push_back(points.back());
  }
  std::vector<std::string> out;
  for (const std::string& p : points) {
    // binfmt_misc's mount point is a directory the kernel keeps empty: it hides nothing.
    if (PathIsUnder(p, "/proc/sys/fs/binfmt_misc")) continue;
    if (absl::c_any_of(procs, [&p](const std::string& proc) { return p != proc && PathIsUnder(p, proc); })) {
      out.push_back(p);
    }
  }
  return out;
}

std::string DiagnoseNamespaces(const NamespaceFacts& f) {
  const std::string& err = f.bwrap_stderr;
  if (absl::StrContains(err, "overflowuid")) {
    return absl::StrCat(
        "/proc shows processes only (mounted with subset=pid), and bubblewrap reads "
        "/proc/sys/kernel/overflowuid to map its user namespace. Fix: ",
        SystemdFix(f, "ProcSubset="));
  }
  if (absl::StrContains(err, "Can't mount proc")) {
    const std::vector<std::string> masks = ProcOvermounts(f.mountinfo);
    if (!masks.empty()) return MaskedProc(f, masks);
    if (Sysctl(f, "kernel.apparmor_restrict_unprivileged_userns") == "1") return AppArmorUserns(f);
    return "";
  }
  if (absl::StrContains(err, "sethostname") || absl::StrContains(err, "set hostname")) {
    return absl::StrCat("a seccomp filter refuses sethostname() (systemd's ProtectHostname=yes "
                        "installs one for the service and everything it starts). Fix: ",
                        SystemdFix(f, "ProtectHostname="));
  }
  if (absl::StrContains(err, "NETLINK_ROUTE") && absl::StrContains(err, "not supported")) {
    return absl::StrCat("netlink sockets are refused, and bubblewrap needs one to bring up the "
                        "loopback of its network namespace. Fix: add AF_NETLINK to "
                        "RestrictAddressFamilies= in the unit",
                        f.systemd_unit.empty() ? "" : absl::StrCat(" (", f.systemd_unit, ")"));
  }
  if (absl::StrContains(err, "does not support user namespaces")) {
    return "this kernel has no user namespaces (CONFIG_USER_NS). Fix: run the worker on a kernel built "
           "with them (every current distribution kernel is)";
  }
  if (absl::StrContains(err, "No space left on device")) {
    return "the user namespace limit is reached or 0 (user.max_user_namespaces). Fix: raise it, e.g. "
           "`sysctl -w user.max_user_namespaces=15000`, and in /etc/sysctl.d/ to keep it";
  }
  if (absl::StrContains(err, "new namespace") && Refused(err)) return NamespacesRefused(f);
  if (absl::StrContains(err, "No permissions to creat")) return NamespacesRefused(f);
  if ((absl::StrContains(err, "uid map") || absl::StrContains(err, "RTM_NEWADDR")) && Refused(err)) {
    if (Sysctl(f, "kernel.apparmor_restrict_unprivileged_userns") == "1") return AppArmorUserns(f);
  }
  if ((absl::StrContains(err, "slave") || absl::StrContains(err, "Can't mount") ||
       absl::StrContains(err, "pivot_root")) && Refused(err)) {
    return MountsRefused(f, err);
  }
  return "";
}

NamespaceFacts GatherNamespaceFacts(const std::string& bwrap_stderr, const std::string& bwrap_path) {
  NamespaceFacts f;
  f.bwrap_stderr = bwrap_stderr;
  f.bwrap_path = bwrap_path;
  f.mountinfo = ReadFile("/proc/self/mountinfo");
  f.status = ReadFile("/proc/self/status");
  for (const char* name : {"kernel.unprivileged_userns_clone", "user.max_user_namespaces",
                           "kernel.apparmor_restrict_unprivileged_userns"}) {
    std::string path = absl::StrCat("/proc/sys/", name);
    std::replace(path.begin() + 10, path.end(), '.', '/');
    if (access(path.c_str(), R_OK) != 0) continue;
    f.sysctls[name] = std::string(absl::StripAsciiWhitespace(ReadFile(path)));
  }
  // systemd sets INVOCATION_ID for what it starts; the unit is the cgroup's last .service.
  const std::string cgroup = ReadFile("/proc/self/cgroup");
  f.systemd_service = getenv("INVOCATION_ID") != nullptr;
  if (f.systemd_service) {
    for (absl::string_view part : absl::StrSplit(cgroup, absl::ByAnyChar("/\n"))) {
      if (absl::EndsWith(part, ".service")) f.systemd_unit = std::string(part);
    }
  }
  f.container = access("/.dockerenv", F_OK) == 0 || access("/run/.containerenv", F_OK) == 0 ||
                getenv("KUBERNETES_SERVICE_HOST") != nullptr;
  return f;
}

}  // namespace anvil::sandbox::internal
