"""What scripts/line.sh says about a line (bookworm, trixie): the one
place where the Python tests read it."""

import os
import subprocess

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def line_var(line: str, expr: str) -> str:
    """The value of the shell expression EXPR (say "$LINE_CHANGELOG")
    after scripts/line.sh for LINE=line; exits with line.sh's message if
    it refuses the line."""
    r = subprocess.run(['bash', '-c', f'top={TOP}; . "$top/scripts/line.sh"; echo "{expr}"'],
                       capture_output=True, text=True, check=False,
                       env=dict(os.environ, LINE=line))
    if r.returncode != 0:
        raise SystemExit(f'scripts/line.sh (LINE={line}): {r.stderr.strip()}')
    return r.stdout.strip()
