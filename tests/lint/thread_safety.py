#!/usr/bin/env python3
"""clang's thread-safety analysis over the product's C++, as errors.

  thread_safety.py BUILD_DIR SOURCE_DIR [--jobs N]
      exit 0, or 1 with clang's diagnostics for every translation unit where
      a guarded member is touched without its mutex, a lock is left held, a
      function's ABSL_EXCLUSIVE_LOCKS_REQUIRED is not met, ...

The build compiles with GCC, which ignores ABSL_GUARDED_BY and its kin; this
check runs `clang++ -fsyntax-only -Wthread-safety -Werror` on each product
.cc file of BUILD_DIR/compile_commands.json (its include paths, definitions
and standard; no other warning) so that the annotations are checked. Only
translation units that can hold a capability are read: those whose own text
or the project headers they include (transitively) name absl::Mutex, its
header, or a thread-safety annotation. The generated sources in BUILD_DIR
and the seed kernels are not ours to check.
"""
import argparse
import concurrent.futures
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
CAPABILITY = re.compile(
    r"absl::Mutex|absl/synchronization/mutex\.h|ABSL_(PT_)?GUARDED_BY|ABSL_\w*LOCKS?_(REQUIRED|EXCLUDED)"
    r"|ABSL_(EXCLUSIVE_|SHARED_)?(LOCK|TRYLOCK)_FUNCTION|ABSL_(ACQUIRE|RELEASE|LOCK_RETURNED|SCOPED_LOCKABLE|LOCKABLE)"
    r"|ABSL_ASSERT_(EXCLUSIVE|SHARED)_LOCK|ABSL_NO_THREAD_SAFETY_ANALYSIS")
KEPT_FLAGS = ("-I", "-D", "-U", "-std=", "-isystem", "-pthread", "-include")
EXEMPT = re.compile(r"^seeds/\d\d_[^/]+/")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def project_includes(path, root):
    """Project files path includes, itself among them, transitively."""
    seen, stack = set(), [path]
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        for name in INCLUDE.findall(read(p)):
            for candidate in (os.path.join(os.path.dirname(p), name), os.path.join(root, name)):
                candidate = os.path.normpath(candidate)
                if os.path.isfile(candidate):
                    stack.append(candidate)
                    break
    return frozenset(seen)


@functools.lru_cache(maxsize=None)
def names_capability(path):
    return bool(CAPABILITY.search(read(path)))


def clang_command(clang, entry):
    """clang++ -fsyntax-only with the entry's paths, definitions and standard only."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    kept, i = [], 1
    while i < len(args):
        a = args[i]
        if a in ("-I", "-D", "-U", "-isystem", "-include"):  # the value is the next argument
            kept += args[i:i + 2]
            i += 2
            continue
        if a.startswith(KEPT_FLAGS):
            kept.append(a)
        i += 1
    return [clang, "-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror",
            *kept, entry["file"]]


def units(build_dir, source_dir):
    """The compile_commands.json entries this check reads."""
    build_dir, source_dir = os.path.realpath(build_dir), os.path.realpath(source_dir)
    with open(os.path.join(build_dir, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    chosen = {}
    for e in entries:
        path = os.path.realpath(os.path.join(e["directory"], e["file"]))
        rel = os.path.relpath(path, source_dir)
        if (not path.endswith(".cc") or rel.startswith("..") or path.startswith(build_dir + os.sep)
                or EXEMPT.match(rel)):
            continue
        if any(names_capability(p) for p in project_includes(path, source_dir)):
            chosen.setdefault(path, dict(e, file=path))  # one per file: the same flags
    return [chosen[p] for p in sorted(chosen)]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("source_dir")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv[1:])
    clang = shutil.which("clang++")
    if clang is None:
        print("thread_safety: clang++ is missing (scripts/setup.sh installs the clang package)",
              file=sys.stderr)
        return 1
    todo = units(args.build_dir, args.source_dir)
    if not todo:
        print("thread_safety: no translation unit to check (no compile_commands.json entries?)",
              file=sys.stderr)
        return 1

    def check(entry):
        r = subprocess.run(clang_command(clang, entry), cwd=entry["directory"],
                           capture_output=True, text=True)
        return entry["file"], r.returncode, r.stdout + r.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for path, rc, out in pool.map(check, todo):
            if rc != 0:
                failed += 1
                print(out, end="")
    print(f"thread_safety: {len(todo)} translation units, {failed} with thread-safety errors")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
