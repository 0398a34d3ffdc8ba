// DiagnoseNamespaces on recorded facts: each cause bubblewrap meets under a
// service manager or container runtime, and the fix it names; then the probe
// passing the diagnosis on in why_not (what `anvil doctor` and the worker's
// refusal print).
#include <sys/stat.h>

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandbox/internal.h"
#include "sandbox/test_util.h"

namespace anvil::sandbox::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kProcRefused[] = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n";

// A host's mounts: /proc with binfmt_misc's automount, which hides nothing.
constexpr char kHostMounts[] =
    "22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
    "27 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
    "40 22 0:35 / /proc/sys/fs/binfmt_misc rw,relatime shared:13 - autofs systemd-1 rw,fd=29\n";

// What ProtectKernelTunables= and ProtectKernelLogs= leave in a unit's mounts.
constexpr char kSystemdMounts[] =
    "622 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "640 622 0:21 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "641 622 0:21 /sysrq-trigger /proc/sysrq-trigger ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "642 622 0:25 /systemd/inaccessible/reg /proc/kcore ro,nosuid,nodev,noexec - tmpfs tmpfs rw\n"
    "643 622 0:25 /systemd/inaccessible/reg /proc/kmsg ro,nosuid,nodev,noexec - tmpfs tmpfs rw\n"
    "644 622 0:21 /acpi /proc/acpi ro,nosuid,nodev,noexec,relatime - proc proc rw\n";

// runc's default masks (procMount: Default), and the NVIDIA toolkit's tmpfs.
constexpr char kContainerMounts[] =
    "701 700 0:60 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "702 701 0:60 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "703 701 0:61 / /proc/acpi ro,relatime - tmpfs tmpfs ro\n"
    "704 701 0:5 /null /proc/kcore rw,nosuid - devtmpfs udev rw\n";
constexpr char kNvidiaMount[] = "705 701 0:62 / /proc/driver/nvidia rw,nosuid,nodev - tmpfs tmpfs rw,mode=555\n";

NamespaceFacts Facts(const std::string& err, const std::string& mounts = kHostMounts) {
  NamespaceFacts f;
  f.bwrap_stderr = err;
  f.bwrap_path = "/opt/anvil/bin/bwrap";
  f.mountinfo = mounts;
  f.status = "Name:\tanvil\nSeccomp:\t0\n";
  return f;
}

TEST(ProcOvermounts, ListsWhatIsMountedBelowProcButBinfmtMisc) {
  EXPECT_TRUE(ProcOvermounts(kHostMounts).empty());
  EXPECT_EQ(ProcOvermounts(kSystemdMounts),
            (std::vector<std::string>{"/proc/sys", "/proc/sysrq-trigger", "/proc/kcore", "/proc/kmsg",
                                      "/proc/acpi"}));
  EXPECT_EQ(ProcOvermounts("1 0 0:1 / /proc rw - proc proc rw\n2 1 0:2 / /proc/my\\040dir ro - tmpfs t ro\n"),
            std::vector<std::string>{"/proc/my dir"});
}

TEST(DiagnoseNamespaces, SystemdMaskNamesTheUnitAndItsSettings) {
  NamespaceFacts f = Facts(kProcRefused, kSystemdMounts);
  f.systemd_service = true;
  f.systemd_unit = "anvil-worker.service";
  const std::string d = DiagnoseNamespaces(f);
  EXPECT_THAT(d, HasSubstr("/proc is masked: /proc/sys, /proc/sysrq-trigger, /proc/kcore, /proc/kmsg and 1 more"));
  EXPECT_THAT(d, HasSubstr("mount_too_revealing"));
  EXPECT_THAT(d, HasSubstr("remove ProtectKernelTunables=, ProtectKernelLogs= and ProtectHostname= from the "
                           "unit (anvil-worker.service)"));
  EXPECT_THAT(d, HasSubstr("deploy/systemd/anvil-worker.service"));
  EXPECT_THAT(d, Not(HasSubstr("procMount")));
}

TEST(DiagnoseNamespaces, ContainerMaskNamesProcMountUnmasked) {
  NamespaceFacts f = Facts(kProcRefused, kContainerMounts);
  f.container = true;
  const std::string d = DiagnoseNamespaces(f);
  EXPECT_THAT(d, HasSubstr("/proc/bus, /proc/acpi, /proc/kcore are mounted over"));
  EXPECT_THAT(d, HasSubstr("procMount: Unmasked with spec.hostUsers: false"));
  EXPECT_THAT(d, HasSubstr("--security-opt systempaths=unconfined"));
  EXPECT_THAT(d, HasSubstr("--security-opt unmask=ALL"));
  EXPECT_THAT(d, Not(HasSubstr("systemd:")));
}

TEST(DiagnoseNamespaces, NvidiaLegacyMountNamesCdiMode) {
  NamespaceFacts f = Facts(kProcRefused, std::string(kContainerMounts) + kNvidiaMount);
  f.container = true;
  EXPECT_THAT(DiagnoseNamespaces(f), HasSubstr("switch the toolkit to CDI mode"));
}

TEST(DiagnoseNamespaces, UnknownManagerNamesEveryFix) {
  const std::string d = DiagnoseNamespaces(Facts(kProcRefused, kSystemdMounts));
  EXPECT_THAT(d, HasSubstr("systemd: remove ProtectKernelTunables="));
  EXPECT_THAT(d, HasSubstr("procMount: Unmasked"));
}

TEST(DiagnoseNamespaces, UnmaskedProcIsNotBlamed) {
  EXPECT_EQ(DiagnoseNamespaces(Facts(kProcRefused)), "");
}

TEST(DiagnoseNamespaces, SubsetPidAndHostnameNameTheirSettings) {
  EXPECT_THAT(DiagnoseNamespaces(Facts("bwrap: Can't read /proc/sys/kernel/overflowuid: No such file or directory")),
              HasSubstr("remove ProcSubset= from the unit"));
  EXPECT_THAT(DiagnoseNamespaces(Facts("bwrap: Can't set hostname to sandbox: Operation not permitted")),
              HasSubstr("remove ProtectHostname= from the unit"));
  EXPECT_THAT(DiagnoseNamespaces(Facts(
                  "bwrap: loopback: Failed to create NETLINK_ROUTE socket: Address family not supported by protocol")),
              HasSubstr("add AF_NETLINK to RestrictAddressFamilies="));
}

TEST(DiagnoseNamespaces, SysctlsThatRefuseUserNamespaces) {
  const std::string eperm =
      "bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
      "non-privileged user namespaces. On e.g. debian this can be enabled with 'sysctl "
      "kernel.unprivileged_userns_clone=1'.";
  NamespaceFacts f = Facts(eperm);
  f.sysctls["kernel.unprivileged_userns_clone"] = "0";
  EXPECT_THAT(DiagnoseNamespaces(f), HasSubstr("`sysctl -w kernel.unprivileged_userns_clone=1`"));
  f = Facts("bwrap: Creating new namespace failed: No space left on device");
  f.sysctls["user.max_user_namespaces"] = "0";
  EXPECT_THAT(DiagnoseNamespaces(f), HasSubstr("sysctl -w user.max_user_namespaces=15000"));
  f = Facts("bwrap: Creating new namespace failed, likely because the kernel does not support user namespaces.");
  EXPECT_THAT(DiagnoseNamespaces(f), HasSubstr("CONFIG_USER_NS"));
}

TEST(DiagnoseNamespaces, AppArmorRestrictionNamesAProfileForThisBwrap) {
  for (const char* err : {"bwrap: setting up uid map: Permission denied",
                          "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted"}) {
    NamespaceFacts f = Facts(err);
    f.sysctls["kernel.apparmor_restrict_unprivileged_userns"] = "1";
    const std::string d = DiagnoseNamespaces(f);
    EXPECT_THAT(d, HasSubstr("profile anvil-bwrap /opt/anvil/bin/bwrap flags=(unconfined) { userns, }")) << err;
    EXPECT_THAT(d, HasSubstr("apparmor_parser -r")) << err;
  }
}

TEST(DiagnoseNamespaces, SeccompFilterNamesItsSource) {
  NamespaceFacts f = Facts("bwrap: No permissions to create a new namespace, likely because the kernel "
                           "does not allow non-privileged user namespaces.");
  EXPECT_EQ(DiagnoseNamespaces(f), "");  // no filter, no sysctl: nothing to name
  f.status = "Name:\tanvil\nSeccomp:\t2\nSeccomp_filters:\t1\n";
  f.container = true;
  EXPECT_THAT(DiagnoseNamespaces(f), HasSubstr("seccompProfile: Unconfined"));
  f.container = false;
  f.systemd_service = true;
  f.systemd_unit = "anvil-worker.service";
  EXPECT_THAT(DiagnoseNamespaces(f), HasSubstr("remove RestrictNamespaces= and SystemCallFilter="));
}

TEST(DiagnoseNamespaces, RefusedMountsNameAppArmorOrSeccomp) {
  NamespaceFacts f = Facts("bwrap: Failed to make / slave: Permission denied");
  EXPECT_THAT(DiagnoseNamespaces(f), HasSubstr("appArmorProfile: Unconfined"));
  f = Facts("bwrap: Failed to make / slave: Operation not permitted");
  f.systemd_service = true;
  f.systemd_unit = "anvil-worker.service";
  EXPECT_THAT(DiagnoseNamespaces(f), HasSubstr("remove SystemCallFilter= from the unit"));
}

TEST(DiagnoseNamespaces, UnknownComplaintHasNoDiagnosis) {
  EXPECT_EQ(DiagnoseNamespaces(Facts("bwrap: execvp /usr/bin/true: No such file or directory")), "");
}

TEST(GatherNamespaceFacts, ReadsThisProcess) {
  const NamespaceFacts f = GatherNamespaceFacts("err", "/usr/bin/bwrap");
  EXPECT_THAT(f.mountinfo, HasSubstr(" / "));
  EXPECT_THAT(f.status, HasSubstr("Seccomp:"));
  for (const auto& [name, value] : f.sysctls) EXPECT_FALSE(value.empty()) << name;
}

// The probe passes the diagnosis on in why_not: a bwrap that fails the way
// bubblewrap 0.8 does under ProtectHostname=yes.
TEST(ProbeUncached, WhyNotCarriesTheDiagnosis) {
  ScratchDir dir = testing::MakeScratch();
  const std::string fake = dir.path() + "/bwrap";
  std::ofstream(fake) << "#!/bin/sh\necho \"bwrap: Can't set hostname to sandbox: Operation not permitted\" >&2\n"
                          "exit 1\n";
  chmod(fake.c_str(), 0755);
  ProbeOptions o;
  o.bwrap_path = fake;
  o.skip_cgroups = true;
  const Capabilities caps = ProbeUncached(o);
  EXPECT_FALSE(caps.namespaces);
  EXPECT_THAT(caps.why_not, HasSubstr("namespaces: bwrap refused: bwrap: Can't set hostname to sandbox: "
                                      "Operation not permitted. a seccomp filter refuses sethostname()"));
  EXPECT_THAT(caps.why_not, HasSubstr("remove ProtectHostname= from the unit"));
}

}  // namespace
}  // namespace anvil::sandbox::internal
