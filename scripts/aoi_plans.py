"""What the aoi-* scripts share: finding `ina` and running `ina plan aoi --json`.

Imported by scripts/aoi-arrival-floor and scripts/aoi-reconfig-floor (from
this directory); not a command.
"""
import json
import os
import shutil
import subprocess
import sys


def find_ina(given, tool):
    """`given`, else build/ina beside the scripts, else `ina` on PATH; exits naming `tool` if none."""
    if given:
        return given
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "ina")
    if os.path.exists(here):
        return here
    found = shutil.which("ina")
    if not found:
        sys.exit(f"{tool}: no ina: build it (make build) or give --ina PATH")
    return found


def plan(ina, scenario, flags, sets, tool):
    """`ina plan aoi SCENARIO --json --quiet FLAGS --set S...` as parsed JSON; exits naming `tool` on failure."""
    cmd = [ina, "plan", "aoi", scenario, "--json", "--quiet", *flags]
    for s in sets:
        cmd += ["--set", s]
    try:
        out = subprocess.run(cmd, check=False, capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"{tool}: cannot run {ina}: {e.strerror or e}")
    if out.returncode != 0:
        sys.exit(f"{tool}: {' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)
