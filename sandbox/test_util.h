// Helpers shared by the sandbox tests: specs for shell jobs, the helper
// program, and looking for processes a job may have left behind.
//
// Thread-safety: the functions are safe to call from many threads.
#ifndef ANVIL_SANDBOX_TEST_UTIL_H_
#define ANVIL_SANDBOX_TEST_UTIL_H_

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "deploy/layout.h"
#include "gtest/gtest.h"
#include "sandbox/sandbox.h"

namespace anvil::sandbox::testing {

// Skips the current test, with the reason, where the kernel refuses namespaces.
#define ANVIL_SKIP_WITHOUT_NAMESPACES()                                                  \
  if (!::anvil::sandbox::Probe().namespaces)                                             \
  GTEST_SKIP() << "namespaces are refused on this node, isolation not testable here: " \
               << ::anvil::sandbox::Probe().why_not

inline std::string TempParent() {
  const char* t = getenv("TMPDIR");
  return t != nullptr && *t == '/' ? t : "/tmp";
}

inline ScratchDir MakeScratch(const std::string& prefix = "anvil-sandbox-test-") {
  absl::StatusOr<ScratchDir> d = ScratchDir::Create(TempParent(), prefix);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::move(*d);
}

inline Spec ShellSpec(const std::string& work_dir, const std::string& script,
                      Isolation isolation = Isolation::kAuto) {
  Spec s;
  s.argv = {"/bin/sh", "-c", script};
  s.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  s.work_dir = work_dir;
  s.isolation = isolation;
  s.limits.wall_time = absl::Seconds(30);
  return s;
}

// A tool the build found (a path baked in at build time) unless the
// environment names another: the bundle runs these tests on nodes where the
// build tree does not exist (bin/anvil-node-checks sets them).
inline std::string ToolPath(const char* env_name, const char* built) {
  const char* v = getenv(env_name);
  return v != nullptr && *v != '\0' ? v : built;
}

// The helper: $ANVIL_SANDBOX_TEST_HELPER, the bundle's (run from
// libexec/cpu-tests), or the build's.
inline std::string HelperPath() {
  const std::string bundled = deploy::Installed("libexec/helpers/sandbox_test_helper");
  return ToolPath("ANVIL_SANDBOX_TEST_HELPER", bundled.empty() ? ANVIL_SANDBOX_TEST_HELPER : bundled.c_str());
}

inline Spec HelperSpec(const std::string& work_dir, std::vector<std::string> args,
                       Isolation isolation = Isolation::kAuto) {
  Spec s;
  s.argv = {HelperPath()};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  s.env = {"PATH=/usr/bin:/bin"};
  s.work_dir = work_dir;
  s.isolation = isolation;
  s.binds.push_back({HelperPath(), "", false});
  // Where the helper's shared libraries are not under /usr (the bundle's
  // lib/), the namespace sandbox must show them too.
  const std::string bundled_libs = deploy::Installed("lib");
  if (const std::string libs = ToolPath("ANVIL_SANDBOX_TEST_LIBS", bundled_libs.c_str()); !libs.empty()) {
    s.binds.push_back({libs, "", false});
  }
  s.limits.wall_time = absl::Seconds(30);
  return s;
}

// "key=value" lines of the helper's output.
inline std::map<std::string, std::string> ParseKv(const std::string& text) {
  std::map<std::string, std::string> kv;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(line, absl::MaxSplits('=', 1));
    kv[p.first] = p.second;
  }
  return kv;
}

// A token no other process has on its command line (e.g. "sleep 977.123456").
inline std::string UniqueSleepArg() {
  static std::mt19937 rng(std::random_device{}());
  return absl::StrCat(900 + rng() % 99, ".", 100000 + rng() % 899999);
}

// Live (not zombie) processes whose command line contains token.
inline int CountProcessesWith(const std::string& token) {
  int n = 0;
  DIR* d = opendir("/proc");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream cmd(absl::StrCat("/proc/", e->d_name, "/cmdline"));
    std::stringstream ss;
    ss << cmd.rdbuf();
    std::string c = ss.str();
    std::replace(c.begin(), c.end(), '\0', ' ');
    std::ifstream stat(absl::StrCat("/proc/", e->d_name, "/stat"));
    std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = s.rfind(')');
    const bool zombie = paren != std::string::npos && paren + 2 < s.size() && s[paren + 2] == 'Z';
    if (c.find(token) != std::string::npos && !zombie) ++n;
  }
  closedir(d);
  return n;
}

// Children of this process, over all its threads.
inline int CountChildren() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(absl::StrCat("/proc/self/task/", e->d_name, "/children"));
    std::string pid;
    while (f >> pid) ++n;
  }
  closedir(d);
  return n;
}

inline int CountEntries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

}  // namespace anvil::sandbox::testing

#endif  // ANVIL_SANDBOX_TEST_UTIL_H_
