#include "store/writer_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace anvil {
namespace {

std::string ReadAll(int fd) {
  std::string text;
  char buf[256];
  ssize_t n;
  if (lseek(fd, 0, SEEK_SET) != 0) return text;
  while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  return std::string(absl::StripAsciiWhitespace(text));
}

}  // namespace

absl::StatusOr<WriterLock> WriterLock::Acquire(const std::string& db_path, const std::string& who) {
  const std::string path = absl::StrCat(db_path, ".lock");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const std::string why = absl::StrCat("cannot open the store's lock file ", path, ": ", strerror(errno));
    return errno == EACCES || errno == EROFS ? absl::PermissionDeniedError(why) : absl::ResourceExhaustedError(why);
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = ReadAll(fd);
    close(fd);
    if (err != EWOULDBLOCK) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot lock ", path, ": ", strerror(err)));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "another process writes the store ", db_path, " (", holder.empty() ? "unknown" : holder,
        "); a store has one writer: stop it, or talk to it (anvil --server HOST:PORT ...)"));
  }
  const std::string me = absl::StrCat(who, ", pid ", getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    // The lock holds all the same; only the message for others is missing.
  }
  return WriterLock(fd);
}

WriterLock& WriterLock::operator=(WriterLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

WriterLock::~WriterLock() {
  if (fd_ >= 0) close(fd_);  // releases the flock
}

}  // namespace anvil
