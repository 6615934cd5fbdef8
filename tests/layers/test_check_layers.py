#!/usr/bin/env python3
"""scripts/check-layers on a copy of src/: clean as it is, and refusing a
planted wrong-way include, a climbing path and an undeclared folder, each
named by file and line."""
import os
import shutil
import subprocess
import sys
import tempfile

root, layers = sys.argv[1], sys.argv[2]
script = os.path.join(root, "scripts", "check-layers")


def run(tree):
    r = subprocess.run([sys.executable, script, "--layers", layers, tree], capture_output=True, text=True)
    return r.returncode, r.stdout


with tempfile.TemporaryDirectory() as tmp:
    for d in ("src", "bench", "python"):
        shutil.copytree(os.path.join(root, d), os.path.join(tmp, d))
    rc, out = run(tmp)
    assert rc == 0, out
    assert out.strip().endswith("0 problem(s)"), out

    victim = os.path.join(tmp, "src", "dataplane", "switch.cpp")
    with open(victim) as fh:
        lines = fh.readlines()
    lines.insert(1, '#include "experiment/runner.hpp"\n')
    with open(victim, "w") as fh:
        fh.writelines(lines)
    rc, out = run(tmp)
    assert rc == 1, out
    assert 'src/dataplane/switch.cpp:2: layer dataplane includes "experiment/runner.hpp" of layer experiment' in out, out

    lines[1] = '#include "../experiment/runner.hpp"\n'
    with open(victim, "w") as fh:
        fh.writelines(lines)
    rc, out = run(tmp)
    assert rc == 1 and "src/dataplane/switch.cpp:2: #include \"../experiment/runner.hpp\" climbs out" in out, out
    del lines[1]
    with open(victim, "w") as fh:
        fh.writelines(lines)

    os.makedirs(os.path.join(tmp, "src", "stray"))
    rc, out = run(tmp)
    assert rc == 1 and "src/stray/: a folder that is no declared layer" in out, out
print("ok")
