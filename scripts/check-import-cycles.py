#!/usr/bin/env python3
"""Fails when the files of a crate import each other in a circle.

Usage: check-import-cycles.py CRATE_SRC_DIR...

Every `use` and every `crate::`/`super::`/`self::` path in a file's code
(comments and a trailing `#[cfg(test)] mod tests { ... }` left out; files
named tests.rs and test-only folders too: a test may reach anywhere) is
an edge from that file to the file of the deepest module the path names.
The crate root (lib.rs, main.rs) is the crate's front door and is not a
node: its re-exports do not make circles. Nor do a folder's mod.rs and
the files below it: a module and its own parts are one unit (mod.rs
holds what its parts share and re-exports what they make); circles
between sibling files, or between folders, are what is reported. A circle of two or more files
is printed with one path around it, and the script exits 1.
"""

import os
import re
import sys


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def strip_tests(text):
    at = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
    return text[: at.start()] if at else text


def module_of(src, path):
    rel = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel in (["lib"], ["main"]):
        return []
    return rel


def file_of(src, module):
    if not module:
        return None
    base = os.path.join(src, *module)
    for candidate in (base + ".rs", os.path.join(base, "mod.rs")):
        if os.path.isfile(candidate):
            return candidate
    return None


def expand_use(tree):
    """`a::{b::C, d}` -> ["a::b::C", "a::d"] (one level of nesting and more)."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [tree.split(" as ")[0].strip()]
    prefix = tree[:brace]
    inner = tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    out = []
    for part in parts:
        if part.strip():
            out += [prefix + p for p in expand_use(part)]
    return out


def resolve(src, here, segments, children):
    """The file the path `segments` (from module `here`) leads to."""
    first = segments[0]
    if first == "crate":
        module, rest = [], segments[1:]
    elif first in ("super", "self"):
        module = list(here)
        rest = segments
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                module = module[:-1]
            rest = rest[1:]
    elif first in children:
        module, rest = list(here), segments
    else:
        return None  # another crate or std
    found = file_of(src, module)
    for seg in rest:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", seg):
            break
        module = module + [seg]
        deeper = file_of(src, module)
        if deeper is None:
            break
        found = deeper
    return found


def edges_of(src, path):
    here = module_of(src, path)
    with open(path, encoding="utf-8") as f:
        code = strip_tests(strip_comments(f.read()))
    children = set(re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code, re.M))
    paths = []
    for tree in re.findall(r"\buse\s+([^;]+);", code):
        paths += expand_use(tree)
    paths += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", code)
    out = set()
    for p in paths:
        segments = [s for s in p.replace(" ", "").split("::") if s]
        if not segments:
            continue
        target = resolve(src, here, segments, children)
        if target and target != path:
            out.add(target)
    return out


def test_only(src, path):
    rel = os.path.relpath(path, src).split(os.sep)
    return rel[-1] == "tests.rs" or "tests" in rel[:-1] or rel[-1] in ("lib.rs", "main.rs")


def nested(src, a, b):
    """Whether one of the files is a module the other lies inside."""
    ma, mb = module_of(src, a), module_of(src, b)
    shorter, longer = sorted((ma, mb), key=len)
    return longer[: len(shorter)] == shorter


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def path_around(graph, component):
    members = set(component)
    start = sorted(component)[0]
    trail, seen = [start], {start}
    while True:
        nxt = sorted(w for w in graph[trail[-1]] if w in members)
        back = [w for w in nxt if w == start]
        if back and len(trail) > 1:
            return trail + [start]
        fresh = [w for w in nxt if w not in seen]
        if not fresh:
            return trail + [nxt[0]] if nxt else trail
        trail.append(fresh[0])
        seen.add(fresh[0])


def main(dirs):
    bad = False
    for src in dirs:
        files = []
        for root, _, names in os.walk(src):
            files += [os.path.join(root, n) for n in names if n.endswith(".rs")]
        graph = {f: edges_of(src, f) for f in sorted(files) if not test_only(src, f)}
        graph = {
            f: {t for t in ts if t in graph and not nested(src, f, t)} for f, ts in graph.items()
        }
        found = cycles(graph)
        for component in found:
            bad = True
            names = [os.path.relpath(f, src) for f in path_around(graph, component)]
            print(f"{src}: files import each other in a circle: {' -> '.join(names)}", file=sys.stderr)
        if not found:
            print(f"{src}: no import circle between its {len(graph)} files")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
