#include "tools/soak/leaks.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace anvil {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> DirNames(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// "Uid:\t0\t0\t0\t0" -> 0 (the real uid).
int64_t RealUid(const std::string& status) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "Uid:")) continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t uid = -1;
    if (!f.empty() && absl::SimpleAtoi(f[0], &uid)) return uid;
  }
  return -1;
}

}  // namespace

std::optional<ProcessInfo> ReadProcess(const std::string& proc_root, int pid) {
  const std::string dir = absl::StrCat(proc_root, "/", pid);
  const std::string stat = ReadAll(dir + "/stat");
  // "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
  const size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  std::vector<std::string> f = absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  ProcessInfo p;
  p.pid = pid;
  p.comm = stat.substr(open + 1, close - open - 1);
  // f[0] is field 3 (state), so field n is f[n - 3].
  if (f.size() < 20 || f[0].empty() || !absl::SimpleAtoi(f[1], &p.ppid) ||
      !absl::SimpleAtoi(f[19], &p.start_ticks)) {
    return std::nullopt;
  }
  p.state = f[0][0];
  p.uid = RealUid(ReadAll(dir + "/status"));
  char cwd[4096];
  const ssize_t len = readlink((dir + "/cwd").c_str(), cwd, sizeof(cwd) - 1);
  if (len > 0) p.cwd.assign(cwd, len);
  p.cmdline = ReadAll(dir + "/cmdline");
  std::replace(p.cmdline.begin(), p.cmdline.end(), '\0', ' ');
  while (!p.cmdline.empty() && p.cmdline.back() == ' ') p.cmdline.pop_back();
  return p;
}

std::vector<ProcessInfo> ListProcesses(const std::string& proc_root) {
  std::vector<ProcessInfo> out;
  for (const std::string& name : DirNames(proc_root)) {
    int pid = 0;
    if (!absl::SimpleAtoi(name, &pid)) continue;
    if (std::optional<ProcessInfo> p = ReadProcess(proc_root, pid)) out.push_back(std::move(*p));
  }
  return out;
}

Leftovers FindLeftovers(const std::vector<ProcessInfo>& all, const LeftoverRules& rules) {
  std::map<int, int> parent;
  for (const ProcessInfo& p : all) parent[p.pid] = p.ppid;
  auto descends_from_self = [&](int pid) {
    for (int hops = 0; hops < 4096 && pid > 1; ++hops) {
      auto it = parent.find(pid);
      if (it == parent.end()) return false;
      pid = it->second;
      if (pid == rules.self_pid) return true;
    }
    return false;
  };
  auto names_scratch = [&](const ProcessInfo& p) {
    return !rules.scratch_root.empty() && (absl::StrContains(p.cwd, rules.scratch_root) ||
                                           absl::StrContains(p.cmdline, rules.scratch_root));
  };
  Leftovers out;
  for (const ProcessInfo& p : all) {
    if (p.pid == rules.self_pid) continue;
    const bool after_self = p.start_ticks >= rules.self_start_ticks;
    if (descends_from_self(p.pid) || (after_self && names_scratch(p))) {
      out.ours.push_back(p);
    } else if (after_self && (p.uid == rules.sandbox_uid || p.comm == rules.runner_name)) {
      out.suspects.push_back(p);
    }
  }
  return out;
}

Leftovers WaitForLeftovers(const std::string& proc_root, const LeftoverRules& rules, double settle_s) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    Leftovers left = FindLeftovers(ListProcesses(proc_root), rules);
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - t0;
    if ((left.ours.empty() && left.suspects.empty()) || waited.count() >= settle_s) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

std::string DescribeProcess(const ProcessInfo& p) {
  const std::string args = p.cmdline.size() <= 200 ? p.cmdline : p.cmdline.substr(0, 200) + "...";
  return absl::StrCat(p.pid, " uid ", p.uid, " ", std::string(1, p.state), " ", p.comm, " in ", p.cwd, ": ", args);
}

std::vector<std::string> ListOpenFds(const std::string& fd_dir) {
  std::vector<std::string> out;
  std::vector<std::string> names = DirNames(fd_dir);
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return std::atoi(a.c_str()) < std::atoi(b.c_str());
  });
  for (const std::string& n : names) {
    char target[4096];
    const ssize_t len = readlink((fd_dir + "/" + n).c_str(), target, sizeof(target) - 1);
    // The directory stream's own descriptor is closed by now: skipped.
    if (len > 0) out.push_back(absl::StrCat(n, " -> ", std::string(target, len)));
  }
  return out;
}

int CountEntries(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  closedir(d);
  return static_cast<int>(DirNames(dir).size());
}

std::vector<std::string> LeftoverJobCgroups(const std::string& cgroup_parent, int pid) {
  std::vector<std::string> out;
  if (cgroup_parent.empty()) return out;
  const std::string prefix = absl::StrCat("anvil-", pid, "-");
  for (const std::string& n : DirNames(cgroup_parent)) {
    if (absl::StartsWith(n, prefix)) out.push_back(cgroup_parent + "/" + n);
  }
  return out;
}

}  // namespace anvil
