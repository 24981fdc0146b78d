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
        locked = {p["name"]: p.get("version", "") for p in tomllib.load(f)["package"]}
    differ = 0
    for line in open(requirements_path, encoding="utf-8"):
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if not m:
            continue
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
        if locked.get(name) != m.group(2):
            differ += 1
            print(f"  {name}: {locked.get(name, '(not locked)')} -> {m.group(2)}")
    if not differ:
        print("  (none: the lock already holds the newest allowed versions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
