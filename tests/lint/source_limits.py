#!/usr/bin/env python3
"""Source limits: no file of the product over 500 lines, no function over 80.

  source_limits.py [SOURCE_DIR]      exit 0, or 1 naming every offender

Checks every tracked .cc/.h/.cu/.cuh/.py/.sh file except the seed kernels
(seeds/NN_name/: long templates, every knob a macro, laid out like CUTLASS's
examples). A file's length is its line count; a function's is lizard's
`length` (first to last line, comments included) for C++, CUDA and Python;
shell scripts are held to the file limit only (lizard reads no shell).
STYLE.md asks for files usually under 400 lines and functions under 40: these
are the hard limits beyond that.
"""
import os
import re
import sys

from tracked import tracked_files

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
CHECKED = re.compile(r"\.(cc|h|cu|cuh|py|sh)$")
EXEMPT = re.compile(r"^seeds/\d\d_[^/]+/")
FUNCTIONS = re.compile(r"\.(cc|h|cu|cuh|py)$")


def offenders(root):
    """Yields one line per file or function over its limit."""
    import lizard  # imported here so that a missing lizard is reported, not a traceback
    for path in tracked_files(root):
        if not CHECKED.search(path) or EXEMPT.match(path):
            continue
        full = os.path.join(root, path)
        with open(full, encoding="utf-8", errors="replace") as f:
            lines = f.read().count("\n")
        if lines > MAX_FILE_LINES:
            yield f"{path}: {lines} lines (the limit is {MAX_FILE_LINES})"
        if not FUNCTIONS.search(path):
            continue
        # .cu/.cuh have no reader of their own in lizard; its C++ reader reads them.
        for fn in lizard.analyze_file(full).function_list:
            if fn.length > MAX_FUNCTION_LINES:
                yield (f"{path}:{fn.start_line}: {fn.name} is {fn.length} lines "
                       f"(the limit is {MAX_FUNCTION_LINES})")


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    try:
        import lizard  # noqa: F401
    except ImportError:
        print("source_limits: the Python module lizard is missing "
              "(python3 -m pip install lizard; scripts/setup.sh installs it)", file=sys.stderr)
        return 1
    found = list(offenders(os.path.abspath(root)))
    for line in found:
        print(line)
    if found:
        print(f"source_limits: {len(found)} over the limits: split them "
              "(files by topic, functions into named steps)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
