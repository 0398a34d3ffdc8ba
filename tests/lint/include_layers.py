#!/usr/bin/env python3
"""Include layering: every `#include "..."` of ours against layers.txt.

  include_layers.py [SOURCE_DIR [TABLE]]   exit 0, or 1 naming every include
                                           that crosses the layering and every
                                           folder the table does not place

Reads every tracked .cc/.h/.cu/.cuh file. An include is resolved as the
compiler would find it in our tree: beside the including file, then from the
repository root; `anvil/...` is a generated protobuf header (proto); a bare
name found once in the tree (an exported package's header) is that file.
Anything else (Abseil, gRPC, CUDA, CUTLASS, ...) is not ours and not checked.
A file belongs to the longest folder of the table its path starts with.
"""
import os
import re
import sys

from tracked import tracked_files

SOURCES = re.compile(r"\.(cc|h|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
TEST_SOURCE = re.compile(r"_test\.cc$")
TEST_DOUBLES = "tests"
TEST_EXTRAS = {TEST_DOUBLES, "node"}  # the shared doubles; whether this node has a GPU


def read_table(path):
    """layers.txt -> {folder: set of folders it may include}."""
    table = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            folder, sep, deps = line.partition(":")
            if not sep or folder.strip() in table:
                raise ValueError(f"{path}:{n}: expected one 'folder: folders...' per folder")
            table[folder.strip()] = set(deps.split())
    for folder, deps in table.items():
        unknown = deps - table.keys()
        if unknown:
            raise ValueError(f"{path}: {folder} may include {sorted(unknown)}, not in the table")
    return table


def unit_of(path, table):
    """The longest folder of the table that path lies in, or None."""
    parts = path.split("/")
    for n in range(len(parts) - 1, 0, -1):
        key = "/".join(parts[:n])
        if key in table:
            return key
    return None


def resolve(include, includer, files, by_name):
    """The tracked path an include names, or None when it is not ours."""
    beside = os.path.normpath(os.path.join(os.path.dirname(includer), include))
    for candidate in (beside, os.path.normpath(include)):
        if candidate in files:
            return candidate
    if include.startswith("anvil/"):
        return "proto/" + include  # generated from proto/anvil/v1/*.proto
    if "/" not in include and len(by_name.get(include, ())) == 1:
        return by_name[include][0]
    return None


def violations(root, table):
    files = set(tracked_files(root))
    by_name = {}
    for f in sorted(files):
        by_name.setdefault(os.path.basename(f), []).append(f)
    unplaced = set()
    for path in sorted(files):
        if not SOURCES.search(path):
            continue
        unit = unit_of(path, table)
        if unit is None:
            unplaced.add(path.split("/")[0] if "/" in path else path)
            continue
        allowed = table[unit] | (TEST_EXTRAS if TEST_SOURCE.search(path) else set())
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                target = m and resolve(m.group(1), path, files, by_name)
                if not target:
                    continue
                to = unit_of(target, table)
                if to is None:
                    unplaced.add(target.split("/")[0])
                elif to != unit and to not in allowed:
                    may = ", ".join(sorted(table[unit])) or "nothing of ours"
                    yield (f"{path}:{n}: {unit} includes {m.group(1)} ({to}); "
                           f"{unit} may include {may}")
    for folder in sorted(unplaced):
        yield f"{folder}/: a folder with sources that layers.txt does not place"


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(here, "..", ".."))
    table = read_table(argv[2] if len(argv) > 2 else os.path.join(here, "layers.txt"))
    found = list(violations(root, table))
    for line in found:
        print(line)
    if found:
        print(f"include_layers: {len(found)} against the layering (tests/lint/layers.txt)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
