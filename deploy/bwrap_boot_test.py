#!/usr/bin/env python3
"""Boots bubblewrap, with the sandbox's own arguments, under the settings the
deploy files give the worker, reproduced on this machine (unit_effects.py):
- every hardening directive of deploy/systemd/anvil-worker.service at once:
  bwrap starts;
- each directive the unit names as left out, on top: bwrap fails, for the
  reason the unit gives, and the sandbox's probe names that directive;
- a container's /proc as its runtime masks it by default (procMount:
  Default), and as deploy/k8s/worker.yaml asks (Unmasked, in a user
  namespace of the pod's own, no capabilities, no_new_privs).
Needs root and user namespaces; exits 77 (ctest: skipped) with the reason
where this machine cannot do it.
Usage: bwrap_boot_test.py [BWRAP [SANDBOX_TEST_HELPER]]"""
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import unit_effects

HERE = os.path.dirname(os.path.abspath(__file__))
UNIT = os.path.join(HERE, "systemd", "anvil-worker.service")
SKIP = 77
SERVICE_UID = 65534  # User=: an unprivileged account; the jobs run as it too
POD_UID = 10001  # deploy/k8s/worker.yaml's runAsUser

# [Service] keys that configure the service rather than confine it.
NOT_HARDENING = {"Type", "User", "Group", "SupplementaryGroups", "EnvironmentFile", "Environment", "ExecStart",
                 "KillSignal", "TimeoutStopSec", "Restart", "RestartPreventExitStatus", "RestartSec",
                 "CacheDirectory", "CacheDirectoryMode", "ConfigurationDirectory", "UMask", "LimitNOFILE"}

# Left-out directives: what bwrap says under each, and what the probe's
# diagnosis must name. None: the reason needs a GPU node (device nodes, the
# CUDA driver), so only the unit's comment is checked.
LEFT_OUT = {
    "ProtectKernelTunables=yes": ("Can't mount proc", "ProtectKernelTunables="),
    "ProtectKernelLogs=yes": ("Can't mount proc", "ProtectKernelLogs="),
    "ProtectHostname=yes": ("Can't mount proc|hostname", "ProtectHostname="),
    "ProcSubset=pid": ("overflowuid", "ProcSubset="),
    "RestrictNamespaces=yes": ("new namespace", "RestrictNamespaces="),
    "SystemCallFilter=@system-service": ("Failed to make / slave", "SystemCallFilter="),
    "PrivateDevices=yes": None,
    "ProtectClock=yes": None,
    "MemoryDenyWriteExecute=yes": None,
    "PrivateUsers=yes": None,
}


def service_settings():
    return unit_effects.unit_settings(UNIT)


def left_out_in_comments():
    """The directives the unit's header names as left out, with their reasons."""
    with open(UNIT) as f:
        head = f.read().split("\n[Unit]")[0]
    block = head.split("# Left out")[1].split("\n# Kept")[0]
    return dict(re.findall(r"(?m)^#   (\w+=\S*)  (.+)$", block))


def kept_effects():
    out = []
    for key, value in service_settings():
        if key not in NOT_HARDENING:
            out.append(unit_effects.effect(key, value))
    return out


class Machine:
    """What this machine offers the test, found once."""
    bwrap = ""
    helper = ""
    scratch = ""

    @classmethod
    def tool(cls, path):
        """Where a program runs from under the reproduced settings: outside
        /usr it is copied into the scratch directory, which they leave
        visible (PrivateTmp= and ProtectHome= hide a build tree in /tmp or /home)."""
        return path if path.startswith("/usr/") else os.path.join(cls.scratch, "bin", os.path.basename(path))

    @classmethod
    def copies(cls):
        return {cls.tool(p): p for p in (cls.bwrap, cls.helper) if p and cls.tool(p) != p}

    @classmethod
    def argv(cls, gpu=False):
        """The sandbox's bubblewrap command line for a job (sandbox/bwrap.cc),
        from the helper when there is one, else the same flags written here."""
        work = os.path.join(cls.scratch, "work")
        if cls.helper:
            out = subprocess.run([cls.helper, "bwrap-argv", work] + (["gpu"] if gpu else []),
                                 capture_output=True, text=True, env={"ANVIL_SANDBOX_BWRAP": cls.bwrap}, check=True)
            return [cls.tool(cls.bwrap)] + out.stdout.splitlines()[1:]
        links = [a for d in ("/bin", "/sbin", "/lib", "/lib64") if os.path.islink(d)
                 for a in ("--symlink", os.readlink(d), d)]
        return ([cls.tool(cls.bwrap), "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                 "--unshare-cgroup-try", "--unshare-net", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                 "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"] + links +
                ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm", "--bind", work, work,
                 "--remount-ro", "/", "--chdir", work, "--", "/usr/bin/true"])


def boot(effects, argv=None, uid=SERVICE_UID, userns=False, env=None):
    """Runs argv (the sandbox's bwrap) under effects; returns (exit code, stderr, stdout)."""
    spec = {"effects": effects, "argv": argv or Machine.argv(), "uid": uid, "userns": userns,
            "scratch": Machine.scratch, "copy": Machine.copies(),
            "env": env or {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}}
    r = subprocess.run([sys.executable, os.path.join(HERE, "unit_effects.py"), json.dumps(spec)],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stderr, r.stdout


def probe(effects, service=True):
    """The sandbox's probe under effects, started as systemd starts a service
    (INVOCATION_ID set) or not: its why_not (empty when namespaces work)."""
    env = {"PATH": "/usr/bin:/bin", "ANVIL_SANDBOX_BWRAP": Machine.tool(Machine.bwrap),
           "ANVIL_SANDBOX_NO_CGROUPS": "1", "TMPDIR": os.path.join(Machine.scratch, "work")}
    if service:
        env["INVOCATION_ID"] = "0" * 32
    rc, err, out = boot(effects, [Machine.tool(Machine.helper), "probe"], env=env)
    fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return "" if fields.get("namespaces") == "yes" else fields.get("why_not", f"probe failed: {err}")


class SystemdUnit(unittest.TestCase):
    def test_every_setting_has_a_reproduction_or_configures(self):
        for key, value in service_settings():
            if key not in NOT_HARDENING:
                self.assertIsNotNone(unit_effects.effect(key, value),
                                     f"{key}={value}: no reproduction in deploy/unit_effects.py; add one")

    def test_unit_comments_on_every_left_out_directive_and_sets_none(self):
        documented = left_out_in_comments()
        self.assertEqual(set(documented), set(LEFT_OUT))
        set_here = {f"{k}={v}" for k, v in service_settings()}
        for directive in LEFT_OUT:
            self.assertNotIn(directive, set_here)
            self.assertNotIn(directive.split("=")[0], dict(service_settings()), directive)

    def test_bwrap_boots_under_the_unit(self):
        for gpu in (False, True):
            rc, err, _ = boot(kept_effects(), Machine.argv(gpu))
            self.assertEqual(rc, 0, f"gpu={gpu}: {err}")

    def test_bwrap_boots_under_each_kept_setting(self):
        for key, value in service_settings():
            if key not in NOT_HARDENING:
                with self.subTest(setting=f"{key}={value}"):
                    rc, err, _ = boot([unit_effects.effect(key, value)])
                    self.assertEqual(rc, 0, err)

    def test_each_left_out_directive_stops_bwrap_and_the_probe_names_it(self):
        for directive, expect in LEFT_OUT.items():
            if expect is None:
                continue
            with self.subTest(directive=directive):
                key, value = directive.split("=", 1)
                effects = kept_effects() + [unit_effects.effect(key, value)]
                rc, err, _ = boot(effects)
                self.assertNotEqual(rc, 0, f"bwrap started under {directive}")
                self.assertRegex(err, expect[0])
                if Machine.helper:
                    self.assertIn(expect[1], probe(effects))

    def test_the_probe_finds_namespaces_under_the_unit(self):
        if not Machine.helper:
            self.skipTest("no sandbox_test_helper given")
        self.assertEqual(probe(kept_effects()), "")

    def test_address_families_keep_netlink_for_the_loopback(self):
        families = dict(service_settings())["RestrictAddressFamilies"]
        self.assertIn("AF_NETLINK", families.split())
        without = " ".join(f for f in families.split() if f != "AF_NETLINK")
        rc, err, _ = boot([unit_effects.effect("RestrictAddressFamilies", without)])
        self.assertNotEqual(rc, 0)
        self.assertIn("NETLINK_ROUTE", err)
        if Machine.helper:
            self.assertIn("AF_NETLINK", probe([unit_effects.effect("RestrictAddressFamilies", without)]))


class Container(unittest.TestCase):
    # deploy/k8s/worker.yaml: allowPrivilegeEscalation false, capabilities
    # dropped, runAsUser 10001, hostUsers false.
    POD = [unit_effects.effect("NoNewPrivileges", "yes"), unit_effects.effect("CapabilityBoundingSet", "")]

    def test_default_proc_masks_stop_bwrap(self):
        rc, err, _ = boot(self.POD + [unit_effects.RUNTIME_MASKS], uid=POD_UID, userns=True)
        self.assertNotEqual(rc, 0)
        self.assertIn("Can't mount proc", err)
        if Machine.helper:
            self.assertIn("procMount: Unmasked", probe([unit_effects.RUNTIME_MASKS], service=False))

    def test_the_manifests_pod_boots_bwrap(self):
        rc, err, _ = boot(self.POD, uid=POD_UID, userns=True)
        self.assertEqual(rc, 0, err)


def find_machine(args):
    """Sets Machine up, or returns why this machine cannot run the test."""
    if os.geteuid() != 0:
        return "not root: reproducing a unit's mounts needs root"
    if unit_effects.LIBSECCOMP is None:
        return "no libseccomp.so.2 (Debian: libseccomp2) to reproduce the unit's system call filters"
    given = args[0] if args and os.access(args[0], os.X_OK) else ""
    Machine.bwrap = given or shutil.which("bwrap") or ""
    if not Machine.bwrap:
        return "no bubblewrap (neither the bundle's nor the bubblewrap package's)"
    Machine.helper = args[1] if len(args) > 1 and os.access(args[1], os.X_OK) else ""
    if not Machine.helper:
        print("bwrap_boot_test: no sandbox_test_helper: the sandbox's argv written here, probe checks skipped")
    Machine.scratch = tempfile.mkdtemp(prefix="anvil-boot-", dir="/run" if os.path.isdir("/run") else None)
    os.chmod(Machine.scratch, 0o755)
    os.mkdir(os.path.join(Machine.scratch, "work"))
    rc, err, _ = boot([])
    if rc != 0:
        return f"bubblewrap does not start here even unconfined ({err.strip()}): user namespaces refused?"
    return ""


def main():
    why = find_machine(sys.argv[1:])
    if why:
        print(f"bwrap_boot_test: skipped: {why}")
        sys.exit(SKIP)
    try:
        unittest.main(argv=sys.argv[:1], verbosity=2)
    finally:
        shutil.rmtree(Machine.scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
