#!/usr/bin/env python3
"""Checks every quoted #include of the C++ sources against the layer order in cmake/layers.txt.

A file may include headers from its own folder and from folders listed before it; an include that
reaches up (or sideways to a later folder of the same layer) is an error, as is a source file in a
folder the list does not name. Exits 1 naming each offending line; with --stamp FILE, touches FILE
on success (the build's custom command uses it to run again only when sources change).
"""
import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = ("*.h", "*.hpp", "*.cpp", "*.cc")


def read_layers(path):
    order = {}  # folder -> (rank, layer)
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        layer, folders = line.split(":", 1)
        for folder in folders.split():
            order[folder] = (len(order), layer.strip())
    return order


def resolve(root, including, name):
    """The file a quoted include names, as the compiler finds it: beside the including file, then
    from the source root or include/ (-I); None for generated or external headers."""
    for base in (including.parent, root, root / "include"):
        candidate = (base / name).resolve()
        if candidate.is_file() and root in candidate.parents:
            return candidate
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent, type=pathlib.Path)
    parser.add_argument("--stamp", type=pathlib.Path)
    args = parser.parse_args()
    root = args.root.resolve()
    order = read_layers(root / "cmake" / "layers.txt")

    def folder_of(path):
        return path.parent.relative_to(root).as_posix()

    errors = []
    for top in sorted({f.split("/")[0] for f in order}):
        for pattern in SOURCES:
            for path in sorted((root / top).rglob(pattern)):
                if "node_modules" in path.parts or path.is_symlink():
                    continue
                folder = folder_of(path)
                if folder not in order:
                    errors.append(f"{path.relative_to(root)}: folder {folder} is in no layer of cmake/layers.txt")
                    continue
                rank, layer = order[folder]
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    match = INCLUDE.match(line)
                    if not match:
                        continue
                    target = resolve(root, path, match.group(1))
                    if target is None:
                        continue
                    target_folder = folder_of(target)
                    if target_folder not in order:
                        errors.append(f"{path.relative_to(root)}:{number}: includes {match.group(1)}, "
                                      f"whose folder {target_folder} is in no layer")
                        continue
                    target_rank, target_layer = order[target_folder]
                    if target_rank > rank:
                        errors.append(f"{path.relative_to(root)}:{number}: {folder} ({layer}) may not include "
                                      f"{match.group(1)}: {target_folder} ({target_layer}) stands above it in "
                                      f"cmake/layers.txt")
    for error in errors:
        print(error, file=sys.stderr)
    if errors:
        print(f"check_layers: {len(errors)} include(s) against the layer order", file=sys.stderr)
        return 1
    if args.stamp:
        args.stamp.parent.mkdir(parents=True, exist_ok=True)
        args.stamp.touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
