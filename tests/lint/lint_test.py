#!/usr/bin/env python3
"""The lint checks on small trees made to break them: each offender is named,
nothing else is, and what is exempt stays exempt."""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import include_layers  # noqa: E402
import source_limits  # noqa: E402
import thread_safety  # noqa: E402
from tracked import tracked_files  # noqa: E402


def function(name, body_lines):
    return f"int {name}() {{\n" + "  x();\n" * (body_lines - 2) + "}\n"


def make_tree(test, files, git=True):
    """A temporary tree, removed after the test; with git, its files are tracked."""
    tmp = tempfile.TemporaryDirectory()
    test.addCleanup(tmp.cleanup)
    for path, text in files.items():
        full = os.path.join(tmp.name, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
    if git:
        subprocess.run(["git", "init", "-q", tmp.name], check=True)
        subprocess.run(["git", "-C", tmp.name, "add", "."], check=True)
    return tmp.name


class SourceLimitsTest(unittest.TestCase):
    def test_names_long_files_and_functions_only(self):
        root = make_tree(self, {
            "a/short.cc": function("Fine", 80),
            "a/long_fn.cc": function("TooLong", 81),
            "a/long_file.h": "//\n" * 501,
            "a/at_limit.h": "//\n" * 500,
            "a/long.py": "def f():\n" + "    x = 1\n" * 81,
            "a/long.sh": "echo\n" * 501,
            "a/kernel.cu": function("Kernel", 90),
            "seeds/01_naive/kernel.cu": function("Seed", 200) + "//\n" * 600,
            "a/notes.md": "x\n" * 900,
        })
        found = list(source_limits.offenders(root))
        self.assertEqual(found, [
            "a/kernel.cu:1: Kernel is 90 lines (the limit is 80)",
            "a/long.py:1: f is 82 lines (the limit is 80)",
            "a/long.sh: 501 lines (the limit is 500)",
            "a/long_file.h: 501 lines (the limit is 500)",
            "a/long_fn.cc:1: TooLong is 81 lines (the limit is 80)",
        ])

    def test_untracked_files_are_not_read(self):
        root = make_tree(self, {"a/ok.cc": function("Fine", 10)})
        with open(os.path.join(root, "a/scratch.cc"), "w") as f:
            f.write(function("Scratch", 200))
        self.assertEqual(list(source_limits.offenders(root)), [])


class IncludeLayersTest(unittest.TestCase):
    TABLE = "proto:\nlow: proto\nmid: low\nhigh: mid low high/inner\nhigh/inner: low\ntests: low\n"

    def check(self, files, git=True):
        root = make_tree(self, dict(files, **{"layers.txt": self.TABLE}), git=git)
        table = include_layers.read_table(os.path.join(root, "layers.txt"))
        return list(include_layers.violations(root, table))

    def test_allowed_includes_pass(self):
        self.assertEqual(self.check({
            "low/a.h": '#include <vector>\n#include "absl/status/status.h"\n',
            "low/a.cc": '#include "low/a.h"\n#include "a.h"\n#include "anvil/v1/x.pb.h"\n',
            "mid/b.cc": '#include "low/a.h"\n',
            "high/c.cc": '#include "mid/b.h"\n#include "low/a.h"\n#include "high/inner/d.h"\n',
            "high/inner/d.h": '#include "low/a.h"\n',
            "mid/b_test.cc": '#include "tests/fake.h"\n',
            "tests/fake.h": '#include "low/a.h"\n',
        }), [])

    def test_names_each_upward_include(self):
        self.assertEqual(self.check({
            "low/a.cc": '#include "low/a.h"\n\n#include "mid/b.h"\n',
            "mid/b.h": "",
            "mid/b.cc": '#include "tests/fake.h"\n',
            "high/inner/d.cc": '#include "high/c.h"\n',
            "high/c.h": "",
            "tests/fake.h": "",
        }), [
            "high/inner/d.cc:1: high/inner includes high/c.h (high); high/inner may include low",
            "low/a.cc:3: low includes mid/b.h (mid); low may include proto",
            "mid/b.cc:1: mid includes tests/fake.h (tests); mid may include low",
        ])

    def test_names_unplaced_folders(self):
        self.assertEqual(self.check({"new/x.cc": '#include "low/a.h"\n', "low/a.h": ""}),
                         ["new/: a folder with sources that layers.txt does not place"])

    def test_without_git_walks_the_tree_but_not_builds(self):
        root = make_tree(self, {"low/a.cc": "", "build/gen.cc": "", "third_party/x/y.h": "",
                     "low/__pycache__/m.pyc": ""}, git=False)
        self.assertEqual(tracked_files(root), ["low/a.cc"])

    def test_the_table_names_only_its_folders(self):
        root = make_tree(self, {"layers.txt": "low:\nmid: low nowhere\n"})
        with self.assertRaisesRegex(ValueError, "nowhere"):
            include_layers.read_table(os.path.join(root, "layers.txt"))


class ThreadSafetyTest(unittest.TestCase):
    GUARDED = """#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
class Counter {
 public:
  void Add() { %s ++n_; }
 private:
  absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};
int main() { Counter c; c.Add(); }
"""

    def run_check(self, files):
        root = make_tree(self, files, git=False)
        build = os.path.join(root, "build")
        os.makedirs(build)
        with open(os.path.join(build, "compile_commands.json"), "w") as f:
            json.dump([{"directory": build, "file": os.path.join(root, name),
                        "command": f"c++ -I{root} -std=c++20 -O2 -Wall -c {name} -o x.o"}
                       for name in files if name.endswith(".cc")], f)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = thread_safety.main(["thread_safety.py", build, root])
        return rc, out.getvalue()

    @unittest.skipUnless(shutil.which("clang++"), "clang++ missing (scripts/setup.sh installs it)")
    def test_names_an_unguarded_access_and_passes_a_guarded_one(self):
        rc, out = self.run_check({"a/bad.cc": self.GUARDED % "",
                                  "a/good.cc": self.GUARDED % "absl::MutexLock l(&mu_);",
                                  "a/plain.cc": "int f() { return 1; }\n"})
        self.assertEqual(rc, 1)
        self.assertIn("bad.cc", out)
        self.assertIn("requires holding mutex 'mu_' exclusively", out)
        self.assertNotIn("good.cc", out)
        self.assertIn("2 translation units, 1 with thread-safety errors", out)

    def test_reads_only_units_that_can_hold_a_capability(self):
        root = make_tree(self, {"a/lock.h": "#include \"absl/synchronization/mutex.h\"\n",
                                "a/uses.cc": '#include "a/lock.h"\n',
                                "a/plain.cc": '#include <vector>\n',
                                "build/gen.cc": "absl::Mutex m;\n"}, git=False)
        with open(os.path.join(root, "build", "compile_commands.json"), "w") as f:
            json.dump([{"directory": root, "file": os.path.join(root, n), "command": "c++ -c x"}
                       for n in ("a/uses.cc", "a/plain.cc", "build/gen.cc")], f)
        found = [e["file"] for e in thread_safety.units(os.path.join(root, "build"), root)]
        self.assertEqual(found, [os.path.join(os.path.realpath(root), "a/uses.cc")])


if __name__ == "__main__":
    unittest.main()
