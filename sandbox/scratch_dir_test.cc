// ScratchDir: creation, moves, and removal that never follows symlinks and
// copes with read-only and very deep directories.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "gtest/gtest.h"
#include "sandbox/test_util.h"

namespace anvil::sandbox {
namespace {

bool Exists(const std::string& p) {
  struct stat st;
  return lstat(p.c_str(), &st) == 0;
}

TEST(ScratchDirTest, CreatesAPrivateDirectoryAndRemovesIt) {
  std::string path;
  {
    absl::StatusOr<ScratchDir> d = ScratchDir::Create(testing::TempParent(), "anvil-sd-");
    ASSERT_TRUE(d.ok()) << d.status();
    path = d->path();
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0711u);
    std::ofstream(path + "/file") << "x";
    ASSERT_EQ(mkdir((path + "/sub").c_str(), 0755), 0);
  }
  EXPECT_FALSE(Exists(path));
}

TEST(ScratchDirTest, MovesOwnership) {
  absl::StatusOr<ScratchDir> d = ScratchDir::Create(testing::TempParent(), "anvil-sd-");
  ASSERT_TRUE(d.ok());
  const std::string path = d->path();
  ScratchDir moved = std::move(*d);
  EXPECT_EQ(moved.path(), path);
  EXPECT_TRUE(Exists(path));
  EXPECT_TRUE(moved.Remove().ok());
  EXPECT_FALSE(Exists(path));
}

TEST(ScratchDirTest, RejectsBadArguments) {
  EXPECT_FALSE(ScratchDir::Create("", "x").ok());
  EXPECT_FALSE(ScratchDir::Create(testing::TempParent(), "a/b").ok());
  EXPECT_FALSE(ScratchDir::Create("/nonexistent/parent", "x").ok());
}

TEST(ScratchDirTest, RemovesReadOnlyDirectories) {
  ScratchDir d = testing::MakeScratch("anvil-sd-");
  const std::string ro = d.path() + "/ro";
  ASSERT_EQ(mkdir(ro.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((ro + "/inner").c_str(), 0755), 0);
  std::ofstream(ro + "/inner/f") << "x";
  ASSERT_EQ(chmod((ro + "/inner").c_str(), 0500), 0);
  ASSERT_EQ(chmod(ro.c_str(), 0000), 0);
  const std::string path = d.path();
  const absl::Status removed = d.Remove();
  EXPECT_TRUE(removed.ok()) << removed;
  EXPECT_FALSE(Exists(path));
}

TEST(ScratchDirTest, DoesNotFollowSymlinksOutOfTheTree) {
  ScratchDir victim = testing::MakeScratch("anvil-victim-");
  std::ofstream(victim.path() + "/precious") << "keep me";
  ASSERT_EQ(mkdir((victim.path() + "/subdir").c_str(), 0755), 0);
  std::ofstream(victim.path() + "/subdir/precious2") << "keep me too";

  ScratchDir d = testing::MakeScratch("anvil-sd-");
  ASSERT_EQ(symlink(victim.path().c_str(), (d.path() + "/link-to-dir").c_str()), 0);
  ASSERT_EQ(symlink((victim.path() + "/precious").c_str(), (d.path() + "/link-to-file").c_str()), 0);
  ASSERT_EQ(mkdir((d.path() + "/nested").c_str(), 0755), 0);
  ASSERT_EQ(symlink((victim.path() + "/subdir").c_str(), (d.path() + "/nested/l").c_str()), 0);
  const std::string path = d.path();
  const absl::Status removed = d.Remove();
  EXPECT_TRUE(removed.ok()) << removed;
  EXPECT_FALSE(Exists(path));
  EXPECT_TRUE(Exists(victim.path() + "/precious"));
  EXPECT_TRUE(Exists(victim.path() + "/subdir/precious2"));
}

TEST(ScratchDirTest, RemovesTreesDeeperThanItHoldsDescriptorsFor) {
  ScratchDir d = testing::MakeScratch("anvil-sd-");
  int fd = open(d.path().c_str(), O_RDONLY | O_DIRECTORY);
  for (int i = 0; i < 300; ++i) {  // far deeper than the 64 levels it descends at once
    ASSERT_EQ(mkdirat(fd, "d", 0755), 0);
    const int next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
    close(fd);
    fd = next;
  }
  close(openat(fd, "leaf", O_WRONLY | O_CREAT, 0644));
  close(fd);
  const std::string path = d.path();
  const absl::Status removed = d.Remove();
  EXPECT_TRUE(removed.ok()) << removed;
  EXPECT_FALSE(Exists(path));
}

}  // namespace
}  // namespace anvil::sandbox
