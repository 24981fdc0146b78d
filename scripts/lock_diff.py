"""Print the packages whose version in a requirements file differs from uv.lock (for `make test-latest`).

usage: python scripts/lock_diff.py uv.lock requirements.txt
"""

from __future__ import annotations

import re
import sys
import tomllib


def main(lock_path: str, requirements_path: str) -> int:
    """Print each differing package as `name: locked -> new`."""
    with open(lock_path, "rb") as f:
        packages = tomllib.load(f)["package"]
    locked: dict[str, set[str]] = {}
    for package in packages:  # a universal lock may hold a package twice (one version per Python range)
        locked.setdefault(package["name"], set()).add(package.get("version", ""))
    differ = 0
    for line in open(requirements_path, encoding="utf-8"):
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if not m:
            continue
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
        if m.group(2) not in locked.get(name, set()):
            differ += 1
            was = ", ".join(sorted(locked.get(name, set()))) or "(not locked)"
            print(f"  {name}: {was} -> {m.group(2)}")
    if not differ:
        print("  (none: the lock already holds the newest allowed versions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
