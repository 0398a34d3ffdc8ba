#include "worker/build_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "sandbox/sandbox.h"

namespace anvil {
namespace {

class BuildCacheDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<sandbox::ScratchDir> d = sandbox::ScratchDir::Create("/tmp", "build-cache-test-");
    ASSERT_TRUE(d.ok()) << d.status();
    dir_.emplace(std::move(*d));
  }
  static int Mode(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? int(st.st_mode & 07777) : -1;
  }
  std::optional<sandbox::ScratchDir> dir_;
};

TEST_F(BuildCacheDirTest, CreatesMissingDirectoriesTheJobsCanPassWhateverTheUmask) {
  const mode_t old = umask(077);
  const std::string cache = dir_->path() + "/a/b/builds";
  absl::Status s = PrepareBuildCacheDir(cache);
  umask(old);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Mode(dir_->path() + "/a"), 0755);
  EXPECT_EQ(Mode(cache), 0755);
}

TEST_F(BuildCacheDirTest, PublishedEntriesAreReadableByTheJobsWhateverTheUmask) {
  const std::string so = dir_->path() + "/candidate.so";
  std::ofstream(so) << "ELF";
  chmod(so.c_str(), 0600);
  const mode_t old = umask(077);
  BuildCache cache(dir_->path() + "/builds");
  ASSERT_TRUE(PrepareBuildCacheDir(cache.dir()).ok());
  absl::StatusOr<v1::Build> b = cache.Publish(std::string(64, 'a'), so, v1::Build());
  umask(old);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Mode(b->artifact()), 0644);
  EXPECT_EQ(Mode(b->artifact().substr(0, b->artifact().rfind('/'))), 0755);
}

TEST_F(BuildCacheDirTest, RootsCacheUnderA0700HomeIsRefusedWithTheFix) {
  if (geteuid() != 0) GTEST_SKIP() << "as a user, jobs run as the caller: a 0700 home is fine";
  const std::string home = dir_->path() + "/root-home";
  ASSERT_EQ(mkdir(home.c_str(), 0700), 0);
  absl::Status s = PrepareBuildCacheDir(home + "/.cache/anvil/builds");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), "not searchable")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "ANVIL_CACHE")) << s;
  if (getenv("ANVIL_CACHE") == nullptr) {
    EXPECT_EQ(DefaultBuildCacheDir(), "/var/tmp/anvil-0/builds");
  }
}

TEST_F(BuildCacheDirTest, AnotherUsersDirectoryInASharedPlaceIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a directory of another uid";
  const std::string shared = dir_->path() + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 01777), 0);
  chmod(shared.c_str(), 01777);
  const std::string theirs = shared + "/anvil-0";
  ASSERT_EQ(mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(chown(theirs.c_str(), 4242, 4242), 0);
  absl::Status s = PrepareBuildCacheDir(theirs + "/builds");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), "swap")) << s;
}

}  // namespace
}  // namespace anvil
