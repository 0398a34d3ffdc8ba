// WriterLock: the one process that writes a store file. `anvil serve`,
// `anvil optimize` and the offline `anvil cancel` hold it while they write,
// so that a second writer (two processes writing one WAL database can corrupt
// it: store.h) is refused with who holds it instead of racing it. An
// exclusive flock(2) on "<db>.lock" beside the database: released by the
// kernel when the holder exits, however it exits, so a killed server never
// leaves a stale lock. Readers (anvil kernels, report, jobs) take none.
//
// Thread-compatible: one owner; movable, not copyable.
#ifndef ANVIL_STORE_WRITER_LOCK_H_
#define ANVIL_STORE_WRITER_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace anvil {

class WriterLock {
 public:
  // Takes the lock of the store at `db_path` for `who` (e.g. "anvil serve").
  // FailedPrecondition naming the holder (its description and pid) when
  // another process has it; ResourceExhausted/PermissionDenied when the lock
  // file cannot be made.
  static absl::StatusOr<WriterLock> Acquire(const std::string& db_path, const std::string& who);
  WriterLock(WriterLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  WriterLock& operator=(WriterLock&& other) noexcept;
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock();

 private:
  explicit WriterLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace anvil

#endif  // ANVIL_STORE_WRITER_LOCK_H_
