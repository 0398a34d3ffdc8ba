"""What the worker's service manager or container runtime does to its mount
namespace and system calls, reproduced on this machine (as root), so that
bubblewrap can be booted under it: each systemd hardening directive by its
mounts and seccomp rules (systemd's src/core/namespace.c tables and
src/shared/seccomp-util.c), and a container runtime's default /proc masks
(runc's, what Kubernetes' procMount: Default gives a container).

effect(key, value) says what a directive does, as data; apply() runs in a
fresh child process, does all of it, drops to the service's uid and execs
the given command. bwrap_boot_test.py drives it."""
import ctypes
import json
import os
import socket
import stat
import sys

# ProtectKernelTunables=yes: read-only or hidden, where they exist.
PROC_TUNABLES_RO = ["/proc/acpi", "/proc/apm", "/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq",
                    "/proc/latency_stats", "/proc/mtrr", "/proc/scsi", "/proc/sys", "/proc/sysrq-trigger",
                    "/proc/timer_stats"]
PROC_TUNABLES_HIDDEN = ["/proc/kallsyms", "/proc/kcore"]
SYS_TUNABLES_RO = ["/sys", "/sys/kernel/debug", "/sys/kernel/tracing", "/sys/fs/bpf"]
# runc's defaults: masked (a file under /dev/null, a directory under a
# read-only tmpfs) and read-only.
RUNTIME_MASKED = ["/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
                  "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
                  "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"]
RUNTIME_RO = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]

EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
NE, EQ, MASKED_EQ = 1, 4, 7  # libseccomp's scmp_compare
NAMESPACE_FLAGS = [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000]
MOUNT_CALLS = ["mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
               "fsmount", "fspick", "mount_setattr"]  # systemd's @mount group


def _refuse(names, errno=EPERM):
    return [[n, errno, []] for n in names]


def _masked(arg, bits, names):
    return [[n, EPERM, [[arg(n), MASKED_EQ, b, b]]] for n in names for b in bits]


def _families(value):
    allowed = {getattr(socket, name) for name in value.split()}
    return [["socket", EAFNOSUPPORT, [[0, EQ, f, 0]]] for f in range(1, 46) if f not in allowed]


def _effect(mounts=(), seccomp=(), nnp=False, no_caps=False, filtered=False):
    return {"mounts": list(mounts), "seccomp": list(seccomp), "nnp": nnp, "no_caps": no_caps,
            "filtered": filtered or bool(seccomp)}


# Each directive with the value the unit may give it. mounts: (op, path); op
# is proc (a new instance; path: its options), ro, hide (an inaccessible
# node bound over), mask (a container runtime's: /dev/null or a read-only
# tmpfs over), tmp (a fresh directory) or ro_all (ProtectSystem=strict:
# everything but /proc, /sys, /dev). apply() orders them as systemd does.
EFFECTS = {
    "ProtectSystem=strict": lambda v: _effect([("ro_all", "")]),
    "ProtectHome=yes": lambda v: _effect([("hide", p) for p in ("/home", "/run/user", "/root")]),
    "PrivateTmp=yes": lambda v: _effect([("tmp", "/tmp"), ("tmp", "/var/tmp")]),
    "ProtectKernelTunables=yes": lambda v: _effect(
        [("ro", p) for p in PROC_TUNABLES_RO] + [("hide", p) for p in PROC_TUNABLES_HIDDEN] +
        [("ro", p) for p in SYS_TUNABLES_RO]),
    "ProtectKernelModules=yes": lambda v: _effect(
        [("hide", "/usr/lib/modules")], _refuse(["init_module", "finit_module", "delete_module"])),
    "ProtectKernelLogs=yes": lambda v: _effect([("hide", "/proc/kmsg"), ("hide", "/dev/kmsg")],
                                               _refuse(["syslog"])),
    "ProtectControlGroups=yes": lambda v: _effect([("ro", "/sys/fs/cgroup")]),
    "ProtectClock=yes": lambda v: _effect(
        seccomp=_refuse(["adjtimex", "clock_adjtime", "clock_settime", "settimeofday"])),
    "ProtectHostname=yes": lambda v: _effect(
        [("ro", "/proc/sys/kernel/hostname"), ("ro", "/proc/sys/kernel/domainname")],
        _refuse(["sethostname", "setdomainname"])),
    "ProtectProc=invisible": lambda v: _effect([("proc", "hidepid=invisible")]),
    "ProcSubset=pid": lambda v: _effect([("proc", "subset=pid")]),
    "RestrictNamespaces=yes": lambda v: _effect(seccomp=(
        _masked(lambda n: 0, NAMESPACE_FLAGS, ["clone", "unshare"]) + _refuse(["setns"]) +
        _refuse(["clone3"], ENOSYS))),
    # @system-service lacks the @mount group; that is what bwrap meets.
    "SystemCallFilter=@system-service": lambda v: _effect(seccomp=_refuse(MOUNT_CALLS)),
    "RestrictRealtime=yes": lambda v: _effect(
        seccomp=[["sched_setscheduler", EPERM, [[1, EQ, p, 0]]] for p in (1, 2, 6)]),
    "RestrictSUIDSGID=yes": lambda v: _effect(seccomp=_masked(
        lambda n: {"chmod": 1, "fchmod": 1, "fchmodat": 2}[n], [0o4000, 0o2000], ["chmod", "fchmod", "fchmodat"])),
    "LockPersonality=yes": lambda v: _effect(seccomp=[["personality", EPERM, [[0, NE, 0, 0]]]]),
    "RestrictAddressFamilies": lambda v: _effect(seccomp=_families(v)),
    # Any filter allows the native architecture only (libseccomp's default).
    "SystemCallArchitectures=native": lambda v: _effect(filtered=True),
    "NoNewPrivileges=yes": lambda v: _effect(nnp=True),
    "CapabilityBoundingSet=": lambda v: _effect(no_caps=True),
    "AmbientCapabilities=": lambda v: _effect(),
}

# What a container gets from its runtime: procMount Default, or Unmasked.
RUNTIME_MASKS = _effect([("mask", p) for p in RUNTIME_MASKED] + [("ro", p) for p in RUNTIME_RO])


def unit_settings(path):
    """The [Service] settings of a unit file, as (key, value) pairs in order."""
    pairs, section = [], ""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[Service]" and "=" in line and not line.startswith("#"):
                key, value = line.split("=", 1)
                pairs.append((key.strip(), value.strip()))
    return pairs


def effect(key, value):
    """The effect of `key=value`, or None when it has no reproduction here."""
    make = EFFECTS.get(key) if key == "RestrictAddressFamilies" else EFFECTS.get(f"{key}={value}")
    return make(value) if make else None


# ---- Run in the child: namespaces, mounts, credentials, seccomp, exec. ----

LIBC = ctypes.CDLL(None, use_errno=True)
try:  # loaded here, before a child leaves for a user namespace that may not reach it
    LIBSECCOMP = ctypes.CDLL("libseccomp.so.2")
except OSError:
    LIBSECCOMP = None
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src, target, fstype, flags, data=""):
    _check(LIBC.mount(src.encode(), target.encode(), fstype.encode() if fstype else None,
                      ctypes.c_ulong(flags), data.encode() if data else None), f"mount {target}")


def _read_only(path):
    if not os.path.ismount(path):
        _mount(path, path, "", MS_BIND | MS_REC)
    _mount("", path, "", MS_REMOUNT | MS_BIND | MS_RDONLY)


def _inaccessible(scratch, path):
    st = os.lstat(path)
    kind = "dir" if stat.S_ISDIR(st.st_mode) else "chr" if stat.S_ISCHR(st.st_mode) else "reg"
    return os.path.join(scratch, "inaccessible", kind)


def _mount_points():
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4].encode().decode("unicode_escape") for line in f]


def _apply_mount(op, path, scratch):
    if op == "proc":
        _mount("proc", "/proc", "proc", 0, path)
    elif op == "ro_all":
        for p in _mount_points():
            if not any(p == d or p.startswith(d + "/") for d in ("/proc", "/sys", "/dev", scratch)):
                try:
                    _mount("", p, "", MS_REMOUNT | MS_BIND | MS_RDONLY)
                except OSError:
                    pass  # covered, or not ours to remount: systemd skips those too
    elif not os.path.lexists(path):
        return  # systemd's tables ignore what the kernel does not have
    elif op == "ro":
        _read_only(path)
    elif op == "hide":
        _mount(_inaccessible(scratch, path), path, "", MS_BIND)
        _mount("", path, "", MS_REMOUNT | MS_BIND | MS_RDONLY)
    elif op == "mask":
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_RDONLY)
        else:
            _mount("/dev/null", path, "", MS_BIND)
    elif op == "tmp":
        fresh = os.path.join(scratch, "tmp" + path.replace("/", "-"))
        os.mkdir(fresh)
        os.chmod(fresh, 0o1777)
        _mount(fresh, path, "", MS_BIND)


def _scratch(scratch):
    _mount("tmpfs", scratch, "tmpfs", 0, "mode=0755")
    os.makedirs(os.path.join(scratch, "inaccessible", "dir"), mode=0)
    os.chmod(os.path.join(scratch, "inaccessible", "dir"), 0)
    open(os.path.join(scratch, "inaccessible", "reg"), "w").close()
    os.chmod(os.path.join(scratch, "inaccessible", "reg"), 0)
    os.mknod(os.path.join(scratch, "inaccessible", "chr"), stat.S_IFCHR, os.makedev(0, 0))
    os.mkdir(os.path.join(scratch, "work"))
    os.chmod(os.path.join(scratch, "work"), 0o777)


def _seccomp(rules):
    lib = LIBSECCOMP
    lib.seccomp_init.restype = ctypes.c_void_p

    class Cmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]

    ctx = ctypes.c_void_p(lib.seccomp_init(0x7fff0000))  # SCMP_ACT_ALLOW
    for name, errno, cmps in rules:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            continue  # not a system call of this architecture
        arr = (Cmp * max(1, len(cmps)))(*[Cmp(*c) for c in cmps])
        rc = lib.seccomp_rule_add_array(ctx, 0x00050000 | errno, nr, len(cmps), arr)
        if rc != 0:
            raise OSError(-rc, f"seccomp rule for {name}")
    if lib.seccomp_load(ctx) != 0:
        raise OSError(EPERM, "seccomp_load")


def _user_namespace(spec):
    """hostUsers: false: this process moves into a user namespace mapping
    0..65535 to 100000.. on the host (a parent writes the maps), as root there."""
    ready, go = os.pipe(), os.pipe()
    pid = os.fork()
    if pid:
        os.read(ready[0], 1)
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write("0 100000 65536\n")
        os.write(go[1], b"x")
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status))
    _check(LIBC.unshare(0x10000000), "unshare(CLONE_NEWUSER)")
    os.write(ready[1], b"x")
    os.read(go[0], 1)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)


def apply(spec):
    """In a child of the test, as root: do what spec["effects"] say, become
    spec["uid"] and exec spec["argv"] with spec["env"]. spec["copy"] maps
    paths in the scratch directory to programs to put there first (a build
    tree or bundle the unit's mounts would hide: /tmp, /home, /root)."""
    programs = {}
    for dest, src in spec.get("copy", {}).items():
        with open(src, "rb") as f:  # read while this process can: before a user namespace
            programs[dest] = f.read()
    if spec.get("userns"):
        _user_namespace(spec)
    _check(LIBC.unshare(0x00020000 | 0x04000000), "unshare(CLONE_NEWNS|CLONE_NEWUTS)")
    _mount("", "/", "", MS_REC | MS_PRIVATE)
    scratch = spec["scratch"]
    _scratch(scratch)
    for dest, data in programs.items():
        os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)
        with open(dest, "wb") as f:
            f.write(data)
        os.chmod(dest, 0o755)
    effects = spec["effects"]
    with open("/proc/sys/kernel/cap_last_cap") as f:  # before a /proc without /proc/sys
        last_cap = int(f.read())
    # systemd's order: a new /proc first, then the read-only root, then what
    # lies on them, the private /tmp last (it stays writable).
    order = {"proc": 0, "ro_all": 1, "tmp": 3}
    for op, path in sorted((m for e in effects for m in e["mounts"]), key=lambda m: order.get(m[0], 2)):
        _apply_mount(op, path, scratch)
    if any(e["no_caps"] for e in effects):
        for cap in range(last_cap + 1):
            _check(LIBC.prctl(24, cap, 0, 0, 0), "PR_CAPBSET_DROP")
    rules = [r for e in effects for r in e["seccomp"]]
    if rules or any(e["filtered"] for e in effects):
        _seccomp(rules)
    os.setgroups([])
    os.setresgid(spec["uid"], spec["uid"], spec["uid"])
    os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    if any(e["nnp"] for e in effects):
        _check(LIBC.prctl(38, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    os.execve(spec["argv"][0], spec["argv"], spec["env"])


if __name__ == "__main__":
    try:
        apply(json.loads(sys.argv[1]))
    except OSError as e:
        print(f"unit_effects: {e}", file=sys.stderr)
        sys.exit(125)
