#!/usr/bin/env python3
"""Fails when a product function of the given source folders is longer
than 80 lines (signature to closing brace).

Usage: check-function-length.py SRC_DIR...

Tests are not product code: `#[cfg(test)] mod ... { }` blocks, files
named tests.rs and folders named tests are skipped. A function is found
by a line starting (after indentation and qualifiers) with `fn NAME`, and
ends at the first later line that closes a brace at the same indentation.
"""

import os
import re
import sys

LIMIT = 80
FN = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")


def product_lines(text):
    """The file's lines, with `#[cfg(test)]` modules blanked out."""
    lines = text.split("\n")
    out, skip_indent = [], None
    for i, line in enumerate(lines):
        if skip_indent is not None:
            out.append("")
            if line.startswith(skip_indent + "}") and line.strip() == "}":
                skip_indent = None
            continue
        if line.strip() == "#[cfg(test)]" and i + 1 < len(lines):
            nxt = lines[i + 1]
            m = re.match(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", nxt)
            if m:
                skip_indent = m.group(1)
                out.append("")
                continue
        out.append(line)
    return out


def long_functions(path):
    with open(path, encoding="utf-8") as f:
        lines = product_lines(f.read())
    found = []
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        indent, name = m.group(1), m.group(2)
        for j in range(i, len(lines)):
            if j > i and lines[j].startswith(indent + "}") and not lines[j].startswith(indent + "} "):
                break
            if j == i and (line.rstrip().endswith(";")):
                j = i
                break
        length = j - i + 1
        if length > LIMIT:
            found.append((i + 1, name, length))
    return found


def main(dirs):
    bad = []
    for src in dirs:
        for root, folders, names in os.walk(src):
            folders[:] = [d for d in folders if d != "tests"]
            for n in sorted(names):
                if n.endswith(".rs") and n != "tests.rs":
                    path = os.path.join(root, n)
                    bad += [(path, *f) for f in long_functions(path)]
    for path, line, name, length in sorted(bad):
        print(f"{path}:{line}: fn {name} is {length} lines (limit {LIMIT})")
    if bad:
        print(f"{len(bad)} functions over {LIMIT} lines", file=sys.stderr)
        return 1
    print(f"{' '.join(dirs)}: no function over {LIMIT} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
