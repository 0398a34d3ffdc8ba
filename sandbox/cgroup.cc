// JobCgroup: per-job cgroup v2 directory. See cgroup.h.
#include "sandbox/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

namespace anvil::sandbox::internal {
namespace {

bool ReadSmallFile(const std::string& path, std::string* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return n == 0;
}

bool WriteSmallFile(const std::string& path, absl::string_view text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  close(fd);
  errno = err;
  return ok;
}

}  // namespace

int64_t ReadCgroupKey(const std::string& file, const std::string& key) {
  std::string text;
  if (!ReadSmallFile(file, &text)) return -1;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, ' ');
    int64_t v = 0;
    if (kv.first == key && absl::SimpleAtoi(kv.second, &v)) return v;
  }
  return -1;
}

absl::StatusOr<std::unique_ptr<JobCgroup>> JobCgroup::Create(const std::string& parent,
                                                             int64_t memory_max) {
  static std::atomic<uint64_t> counter{0};
  const std::string path = absl::StrCat(parent, "/anvil-", getpid(), "-", counter++);
  if (mkdir(path.c_str(), 0755) != 0) {
    return absl::UnavailableError(absl::StrCat("mkdir ", path, ": ", strerror(errno)));
  }
  bool limited = false;
  if (memory_max > 0) {
    if (!WriteSmallFile(path + "/memory.max", absl::StrCat(memory_max))) {
      const int err = errno;
      rmdir(path.c_str());
      return absl::UnavailableError(absl::StrCat("memory.max: ", strerror(err)));
    }
    WriteSmallFile(path + "/memory.swap.max", "0");  // absent without swap accounting
    limited = true;
  }
  int fd = open((path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    rmdir(path.c_str());
    return absl::UnavailableError(absl::StrCat("cgroup.procs: ", strerror(err)));
  }
  return std::unique_ptr<JobCgroup>(new JobCgroup(path, fd, limited));
}

JobCgroup::~JobCgroup() {
  if (!removed_) Finish();
}

void JobCgroup::Kill() {
  if (WriteSmallFile(path_ + "/cgroup.kill", "1")) return;
  std::string procs;  // kernels before 5.14: one SIGKILL per member
  if (!ReadSmallFile(path_ + "/cgroup.procs", &procs)) return;
  for (absl::string_view line : absl::StrSplit(procs, '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) kill(pid, SIGKILL);
  }
}

bool JobCgroup::WaitEmpty() {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < give_up) {
    if (ReadCgroupKey(path_ + "/cgroup.events", "populated") == 0) return true;
    Kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

JobCgroup::Stats JobCgroup::Finish() {
  Stats stats;
  if (removed_) return stats;
  removed_ = true;
  Kill();
  const bool empty = WaitEmpty();
  const int64_t usec = ReadCgroupKey(path_ + "/cpu.stat", "usage_usec");
  stats.cpu_known = usec >= 0;
  if (usec > 0) stats.cpu_seconds = static_cast<double>(usec) / 1e6;
  if (memory_limited_) {
    stats.oom_killed = ReadCgroupKey(path_ + "/memory.events", "oom_kill") > 0;
  }
  std::string peak;
  int64_t peak_bytes = 0;
  if (ReadSmallFile(path_ + "/memory.peak", &peak) &&
      absl::SimpleAtoi(absl::StripAsciiWhitespace(peak), &peak_bytes)) {
    stats.peak_bytes = peak_bytes;
  }
  close(procs_fd_);
  procs_fd_ = -1;
  if (!empty || rmdir(path_.c_str()) != 0) {
    spdlog::warn("sandbox: cannot remove cgroup {} ({}): left behind", path_,
                 empty ? strerror(errno) : "still populated");
  }
  return stats;
}

}  // namespace anvil::sandbox::internal
