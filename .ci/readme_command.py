"""Print the shell command that README.md marks with `<!-- command: NAME -->` (the next fenced block)."""

import re
import sys
from pathlib import Path

name = sys.argv[1]
text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
match = re.search(rf"<!-- command: {re.escape(name)} -->\s*```(?:bash|sh|console)?\n(.*?)```", text, re.S)
if not match:
    sys.exit(f"README.md has no block marked <!-- command: {name} -->")
print(" ".join(line.strip().rstrip("\\").strip() for line in match.group(1).strip().splitlines()))
