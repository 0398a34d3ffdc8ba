"""The product's tracked source files, for the lint checks.

tracked_files(root) lists the files git tracks under root (paths relative to
it, '/'-separated, sorted); outside a git checkout (an unpacked source archive)
it walks the tree instead, skipping what .gitignore keeps out of the
repository: build folders, third_party/, .bundle/ and .git/.
"""
import os
import subprocess

_IGNORED_TOP = ("third_party", ".bundle", ".git")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        files = [f for f in out.decode().split("\0") if f]
        if files:
            return sorted(f for f in files if os.path.isfile(os.path.join(root, f)))
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel == ".":
            dirnames[:] = [d for d in dirnames
                           if d not in _IGNORED_TOP and not d.startswith("build")]
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            files.append(os.path.normpath(os.path.join(rel, name)).replace(os.sep, "/"))
    return sorted(files)
