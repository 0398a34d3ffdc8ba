#!/usr/bin/env python3
"""Checks the deployment files for what can be checked without a cluster:
the Kubernetes manifests parse and hang together (one server replica with its
store on a PVC, probes on the gRPC port, the worker DaemonSet asking for
nvidia.com/gpu, the token Secret they mount, Services selecting the pods,
the worker pod set up so the sandbox can make its namespaces and mount a
fresh /proc), the systemd units pass `systemd-analyze verify` (when present),
the worker's unit sets none of the directives bubblewrap cannot live with
(deploy/bwrap_boot_test.py boots it under each), and every bundle path the
container recipes and units name is one the bundle has (the built bundle
when given, else deploy/bundle's layout).  Usage: deploy_test.py [BUNDLE_DIR]"""
import os
import re
import shutil
import subprocess
import sys
import unittest

import yaml

import unit_effects

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLE = sys.argv.pop(1) if len(sys.argv) > 1 else ""
BUNDLE = BUNDLE if os.path.isdir(BUNDLE) else ""  # not built: deploy/bundle's layout


def text(*parts):
    with open(os.path.join(HERE, *parts)) as f:
        return f.read()


def load(name):
    with open(os.path.join(HERE, "k8s", name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def bundle_layout():
    """Paths (relative to the bundle root) deploy/bundle creates."""
    script = text("bundle")
    paths = {"bin", "lib", "libexec", "share", "share/anvil", "VERSION"}
    exes = re.search(r"for exe in ([^;]+); do", script).group(1).split()
    paths |= {"bin/" + e for e in exes}
    if "command -v bwrap" in script:
        paths.add("bin/bwrap")
    paths |= {"share/anvil/" + m for m in re.findall(r'"\$ROOT/share/anvil/(\w+)"', script)}
    return paths


def in_bundle(rel):
    rel = rel.rstrip("/")
    if BUNDLE:
        return os.path.exists(os.path.join(BUNDLE, rel))
    return rel in bundle_layout()


class Kubernetes(unittest.TestCase):
    def test_server_is_one_replica_with_its_store_on_a_pvc(self):
        docs = load("server.yaml")
        (dep,) = by_kind(docs, "Deployment")
        self.assertEqual(dep["spec"]["replicas"], 1)
        self.assertEqual(dep["spec"]["strategy"]["type"], "Recreate")
        pod = dep["spec"]["template"]["spec"]
        (pvc,) = by_kind(docs, "PersistentVolumeClaim")
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
        self.assertEqual(claims, [pvc["metadata"]["name"]])
        (c,) = pod["containers"]
        env = {e["name"]: e["value"] for e in c["env"]}
        store_mount = [m["mountPath"] for m in c["volumeMounts"] if m["name"] == "store"][0]
        self.assertTrue(env["ANVIL_SERVER_DB"].startswith(store_mount + "/"))
        port = env["ANVIL_SERVER_LISTEN"].rsplit(":", 1)[1]
        ports = {p["containerPort"] for p in c["ports"]}
        self.assertIn(int(port), ports)
        for probe in ("readinessProbe", "livenessProbe"):
            self.assertEqual(c[probe]["grpc"]["port"], int(port), probe)

    def test_services_select_their_pods(self):
        for name in ("server.yaml",):
            docs = load(name)
            pods = {tuple(sorted(d["spec"]["template"]["metadata"]["labels"].items())) for d in docs
                    if d["kind"] in ("Deployment", "DaemonSet")}
            for svc in by_kind(docs, "Service"):
                sel = svc["spec"]["selector"]
                self.assertTrue(any(all(dict(p).get(k) == v for k, v in sel.items()) for p in pods))

    def test_worker_daemonset_asks_for_a_gpu_and_reaches_the_server(self):
        (ds,) = by_kind(load("worker.yaml"), "DaemonSet")
        (c,) = ds["spec"]["template"]["spec"]["containers"]
        self.assertGreaterEqual(int(c["resources"]["limits"]["nvidia.com/gpu"]), 1)
        env = {e["name"]: e["value"] for e in c["env"]}
        (svc,) = by_kind(load("server.yaml"), "Service")
        host, port = env["ANVIL_SERVER"].rsplit(":", 1)
        self.assertEqual(host, svc["metadata"]["name"])
        self.assertIn(int(port), [p["port"] for p in svc["spec"]["ports"]])

    def test_worker_build_slots_fit_the_pods_cpu_request(self):
        # The worker's default counts the node's cores, which the pod's
        # limits do not cap: the manifest names its build slots.
        (ds,) = by_kind(load("worker.yaml"), "DaemonSet")
        (c,) = ds["spec"]["template"]["spec"]["containers"]
        slots = int(c["args"][c["args"].index("--build-slots") + 1])
        self.assertGreaterEqual(slots, 1)
        self.assertLessEqual(slots, float(c["resources"]["requests"]["cpu"]))

    def test_worker_pod_lets_the_sandbox_make_namespaces_and_mount_proc(self):
        (ds,) = by_kind(load("worker.yaml"), "DaemonSet")
        pod = ds["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        sc = c["securityContext"]
        # A fresh /proc in bubblewrap's namespaces needs an unmasked one; the
        # API allows Unmasked only in a user namespace of the pod's own.
        self.assertEqual(sc["procMount"], "Unmasked")
        self.assertIs(pod["hostUsers"], False)
        # The runtime's default seccomp and AppArmor profiles refuse namespaces and mounts.
        self.assertIn(sc["seccompProfile"]["type"], ("Unconfined", "Localhost"))
        self.assertIn(sc["appArmorProfile"]["type"], ("Unconfined", "Localhost"))
        # Unprivileged otherwise: bubblewrap's capabilities live in its own namespaces.
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertEqual(sc["capabilities"], {"drop": ["ALL"]})
        self.assertFalse(sc.get("privileged", False))
        self.assertIs(pod["securityContext"]["runAsNonRoot"], True)
        for shared in ("hostPID", "hostIPC", "hostNetwork"):  # refused with hostUsers: false
            self.assertFalse(pod.get(shared, False), shared)

    def test_both_mount_the_token_secret(self):
        (secret,) = by_kind(load("secret.yaml"), "Secret")
        self.assertIn("token", secret["stringData"])
        for name, kind, flag in (("server.yaml", "Deployment", "--auth-token-file"),
                                 ("worker.yaml", "DaemonSet", "--token-file")):
            (w,) = by_kind(load(name), kind)
            pod = w["spec"]["template"]["spec"]
            vols = {v["name"]: v for v in pod["volumes"]}
            (c,) = pod["containers"]
            mount = [m for m in c["volumeMounts"] if vols[m["name"]].get("secret")][0]
            self.assertEqual(vols[mount["name"]]["secret"]["secretName"], secret["metadata"]["name"])
            token_path = c["args"][c["args"].index(flag) + 1]
            self.assertEqual(token_path, mount["mountPath"] + "/token")


# Directives under which the sandbox cannot work, each with its reason in
# the worker unit's header.
SANDBOX_CANNOT_RUN_UNDER = ("ProtectKernelTunables", "ProtectKernelLogs", "ProtectHostname", "ProcSubset",
                            "RestrictNamespaces", "SystemCallFilter", "PrivateDevices", "ProtectClock",
                            "MemoryDenyWriteExecute", "PrivateUsers")


class Systemd(unittest.TestCase):
    UNITS = ("anvil-server.service", "anvil-worker.service")

    def read(self, unit):
        return text("systemd", unit)

    def test_units_verify(self):
        if not shutil.which("systemd-analyze"):
            self.skipTest("systemd-analyze not installed")
        for unit in self.UNITS:
            out = subprocess.run(["systemd-analyze", "verify", os.path.join(HERE, "systemd", unit)],
                                 capture_output=True, text=True)
            # The bundle is not installed in /opt/anvil here; anything else is an error.
            lines = [l for l in (out.stdout + out.stderr).splitlines()
                     if l.strip() and not re.search(r"Command /opt/anvil/bin/\S+ is not executable", l)]
            self.assertEqual(lines, [], unit)

    def settings(self, unit):
        return dict(unit_effects.unit_settings(os.path.join(HERE, "systemd", unit)))

    def test_worker_sets_nothing_bubblewrap_cannot_live_with(self):
        w = self.settings("anvil-worker.service")
        for key in SANDBOX_CANNOT_RUN_UNDER:
            self.assertNotIn(key, w, f"anvil-worker.service: {key}= (see the unit's header)")
        self.assertEqual(w["NoNewPrivileges"], "yes")
        # bubblewrap brings up the job's loopback over netlink.
        self.assertIn("AF_NETLINK", w["RestrictAddressFamilies"].split())
        # 4: the node cannot work (no GPU, no isolation); restarting cannot help.
        self.assertIn("4", w["RestartPreventExitStatus"].split())

    def test_server_stays_confined_tightly(self):
        # The server never runs candidates: what the worker leaves out, it keeps.
        s = self.settings("anvil-server.service")
        for key in ("ProtectKernelTunables", "ProtectKernelLogs", "ProtectHostname", "RestrictNamespaces",
                    "PrivateDevices", "MemoryDenyWriteExecute", "ProtectClock"):
            self.assertEqual(s.get(key), "yes", key)
        self.assertEqual(s.get("SystemCallFilter"), "@system-service")

    def test_units_name_bundle_paths(self):
        for unit in self.UNITS:
            for path in re.findall(r"/opt/anvil/(\S+)", self.read(unit)):
                self.assertTrue(in_bundle(path), f"{unit}: /opt/anvil/{path} is not in the bundle")


class Containers(unittest.TestCase):
    def test_copy_sources_and_env_paths_are_in_the_bundle(self):
        for name in ("Containerfile.server", "Containerfile.worker"):
            recipe = text("container", name)
            self.assertRegex(recipe, r"(?m)^FROM (debian:bookworm|nvidia/cuda:)")
            copies = re.findall(r"(?m)^COPY (?!--from)(\S+) (\S+)$", recipe)
            self.assertTrue(copies, name)
            for src, _ in copies:
                self.assertTrue(src.startswith("anvil"), src)
                rel = src[len("anvil"):].lstrip("/")
                self.assertTrue(rel == "" or in_bundle(rel), f"{name}: {src} is not in the bundle")
            for path in re.findall(r"/opt/anvil/([\w./-]+)", recipe):
                self.assertTrue(in_bundle(path) or path.startswith("lib/"), f"{name}: /opt/anvil/{path}")

    def test_worker_recipe_names_what_the_sandbox_needs_from_the_runtime(self):
        wrk = text("container", "Containerfile.worker")
        for opt in ("seccomp=unconfined", "apparmor=unconfined", "unmask=ALL", "systempaths=unconfined",
                    "--device nvidia.com/gpu=all"):
            self.assertIn(opt, wrk)

    def test_server_image_is_not_open_by_default(self):
        # It listens on 0.0.0.0: without a token it refuses to start, and the
        # recipe must not switch that off for everyone who builds it.
        srv = text("container", "Containerfile.server")
        self.assertIn("ANVIL_SERVER_LISTEN=0.0.0.0", srv)
        self.assertNotRegex(srv, r"(?m)^\s*(ENV|ARG).*ANVIL_AUTH_ALLOW_UNAUTHENTICATED")
        self.assertIn("--auth-token-file", srv)
        (dep,) = by_kind(load("server.yaml"), "Deployment")
        (c,) = dep["spec"]["template"]["spec"]["containers"]
        self.assertIn("--auth-token-file", c["args"])
        self.assertNotIn("ANVIL_AUTH_ALLOW_UNAUTHENTICATED", {e["name"] for e in c["env"]})

    def test_server_image_is_debian_and_worker_image_is_cuda(self):
        srv = text("container", "Containerfile.server")
        wrk = text("container", "Containerfile.worker")
        self.assertIn("FROM debian:bookworm", srv)
        self.assertRegex(wrk, r"FROM nvidia/cuda:[\d.]+-devel")


if __name__ == "__main__":
    unittest.main()
