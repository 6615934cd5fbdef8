"""The `ina` Python package (ctest python.ina; PYTHONPATH = the build's python/, INA_BINARY = ina).

Allreduce runs start their ranks with `ina train-py` (switch, PS, N copies of
a script); each rank checks its results bit for bit against numpy
(allreduce_worker.py) and the test reads their reports.
"""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import ina

HERE = os.path.dirname(os.path.abspath(__file__))
INA = os.environ.get("INA_BINARY", os.path.join(HERE, "..", "..", "build", "ina"))
SOURCE = os.environ.get("INA_SOURCE_DIR", os.path.join(HERE, "..", ".."))
KEY = "0" * 63 + "1"  # a well-formed job credential for runs that never reach a switch


def train_py(workers, scheme, script, script_args, extra=(), timeout=120):
    cmd = [INA, "train-py", "--workers", str(workers), "--scheme", scheme, "--timeout", "90", *extra,
           os.path.join(HERE, script), "--", *script_args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def reports(d, n):
    out = []
    for r in range(n):
        with open(os.path.join(d, f"rank{r}.json")) as f:
            out.append(json.load(f))
    return out


class Env:
    """Sets environment variables for a block (the C++ side reads the process environment)."""

    def __init__(self, **kv):
        self.kv, self.old = kv, {}

    def __enter__(self):
        for k, v in self.kv.items():
            self.old[k] = os.environ.get(k)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


CLEAN = {k: None for k in ("INA_CONFIG", "INA_RANK", "INA_WORKERS", "INA_SWITCH", "INA_LOSS", "RANK", "WORLD_SIZE")}


class Config(unittest.TestCase):
    """The C++ settings table from a dict, a TOML file, INA_* and torchrun's variables."""

    def test_sources_and_precedence(self):
        with Env(**CLEAN):
            c = ina.resolve_config({"switch": "127.0.0.1:9", "rank": 1, "workers": 4, "offload": False,
                                    "scale": 1024.0, "timeout_ms": 2500, "faults": {"loss": 0.01}})
            self.assertEqual((c["switch"], c["rank"], c["workers"], c["offload"], c["scale"], c["timeout_ms"],
                              c["faults"]["loss"]), ("127.0.0.1:9", 1, 4, False, 1024.0, 2500.0, 0.01))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "job.toml")
            with open(path, "w") as f:
                f.write('[communicator]\nswitch = "127.0.0.1:8"\nworkers = 3\nrank = 2\n[faults]\nloss = 0.02\n')
            with Env(**CLEAN):
                c = ina.resolve_config(path)
                self.assertEqual((c["switch"], c["rank"], c["workers"], c["faults"]["loss"]), ("127.0.0.1:8", 2, 3, 0.02))
            # INA_* over INA_CONFIG; torchrun's RANK / WORLD_SIZE only where INA_RANK / INA_WORKERS are unset; a dict over all
            with Env(**{**CLEAN, "INA_CONFIG": path, "INA_RANK": "1", "RANK": "0", "WORLD_SIZE": "5"}):
                c = ina.resolve_config()
                self.assertEqual((c["switch"], c["rank"], c["workers"]), ("127.0.0.1:8", 1, 5))
                c = ina.resolve_config({"rank": 4})
                self.assertEqual((c["rank"], c["workers"]), (4, 5))

    def test_bad_values_name_source_field_and_value(self):
        with Env(**CLEAN):
            cases = [({"rank": "x"}, "config dict: communicator.rank 'x'"),
                     ({"faults": {"los": 0.1}}, "config dict: unknown key faults.los"),
                     ({"switch": "nowhere"}, "nowhere"),
                     ({"rank": 2, "workers": 2}, "rank 2 (rank, INA_RANK, --rank) is not below the worker count 2")]
            for cfg, text in cases:
                with self.assertRaises(ina.Error) as e:
                    ina.resolve_config(cfg)
                self.assertIn(text, str(e.exception))
            with self.assertRaisesRegex(TypeError, "config dict: rank: expected a number"):
                ina.resolve_config({"rank": [1]})
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.toml")
            with open(path, "w") as f:
                f.write("[communicator]\nworkers = 0\n")
            with Env(**CLEAN), self.assertRaises(ina.Error) as e:
                ina.resolve_config(path)
            self.assertIn(f"{path}: communicator.workers '0'", str(e.exception))
        with Env(**{**CLEAN, "INA_LOSS": "2"}), self.assertRaises(ina.Error) as e:
            ina.resolve_config()
        self.assertIn("INA_LOSS '2'", str(e.exception))

    def test_a_directory_or_device_is_no_configuration(self):
        with tempfile.TemporaryDirectory() as d:
            with Env(**CLEAN), self.assertRaises(ina.Error) as e:
                ina.resolve_config(d)
            self.assertIn(f"communicator configuration '{d}' is a directory", str(e.exception))
            with Env(**{**CLEAN, "INA_CONFIG": d}), self.assertRaises(ina.Error) as e:
                ina.resolve_config()
            self.assertIn(f"INA_CONFIG: communicator configuration '{d}' is a directory", str(e.exception))
        with Env(**CLEAN), self.assertRaises(ina.Error) as e:
            ina.resolve_config("/dev/zero")
        self.assertIn("'/dev/zero' is not a regular file", str(e.exception))

    def test_no_switch_fails_within_the_timeout_naming_the_address(self):
        # refused: nothing listens on the port
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with Env(**CLEAN):
            t0 = time.monotonic()
            with self.assertRaises(ina.Error) as e:
                ina.Communicator({"switch": f"127.0.0.1:{port}", "job_key": KEY, "connect_timeout_ms": 500})
            self.assertIn(f"127.0.0.1:{port}", str(e.exception))
            self.assertLess(time.monotonic() - t0, 0.5 + 2.0)
            # silent: a TCP listener that never answers; the join times out after connect_timeout
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                s.listen()
                addr = f"127.0.0.1:{s.getsockname()[1]}"
                t0 = time.monotonic()
                with self.assertRaises(ina.Error) as e:
                    ina.Communicator({"switch": addr, "job_key": KEY, "connect_timeout_ms": 700,
                                      "rendezvous_timeout_ms": 700})
                took = time.monotonic() - t0
            self.assertIn(addr, str(e.exception))
            self.assertGreaterEqual(took, 0.7)
            self.assertLess(took, 0.7 + 2.0)


class Allreduce(unittest.TestCase):
    """allreduce / allreduce_async exact against numpy, 2 and 4 processes, sizes off the payload, 1 % loss."""

    def run_job(self, workers, scheme, loss, torch=False):
        with tempfile.TemporaryDirectory() as d:
            extra = ["--payload", "64"] + (["--loss", str(loss)] if loss else [])
            r = train_py(workers, scheme, "allreduce_worker.py", ["--out", d] + (["--torch"] if torch else []), extra)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            reps = reports(d, workers)
            if scheme == "zebra":
                # every hot pair is aggregated in the switch, once (100 + 150 pairs)
                self.assertEqual([rep["hot_version"] for rep in reps], [1] * workers)
                self.assertIn(f"{sum(rep['hot_pairs'] for rep in reps)} aggregated in the switch", r.stdout + r.stderr)
        sizes = [1, 63, 64, 65, 1000, 4099]
        # per size: float sum, float average, int32 sum; then three async ops (the last one's handle dropped
        # before wait()); with torch three more; sparse: keys (the union) and values
        union = 2 * len(set().union(*(self.sparse_keys(r) for r in range(workers))))
        hot = union if scheme == "zebra" else 0  # zebra: the sparse op again, its keys all in a hot set
        want = 3 * sum(sizes) + 4099 + 1000 + 4099 + union + hot + ((4099 + 4098 + 1000) if torch else 0)
        lost = 0
        # rank 0's other thread ran while its allreduce waited for rank 1 (the GIL was released)
        self.assertGreaterEqual(reps[0]["gil_wait_s"], 0.3)
        self.assertGreaterEqual(reps[0]["gil_ticks"], 50)
        for rep in reps:
            self.assertEqual(rep["mismatches"], [])
            self.assertEqual(rep["payload"], 64)
            self.assertEqual(rep["checked"], want)
            lost += rep["stats"]["engine"]["fault_lost"]
        if loss:
            self.assertGreater(lost, 0)  # loss was injected at the workers
        else:
            self.assertEqual(lost, 0)
        return reps

    def test_two_workers_switchml_numpy_and_torch(self):
        self.run_job(2, "switchml", 0, torch=True)

    def test_four_workers_dsa_one_percent_loss(self):
        self.run_job(4, "dsa", 0.01)

    def test_two_workers_atp_one_percent_loss(self):
        self.run_job(2, "atp", 0.01)

    def test_two_workers_zebra_one_percent_loss(self):
        self.run_job(2, "zebra", 0.01)  # the sparse op at the PS (no hot set), then again through a hot set

    @staticmethod
    def sparse_keys(r, seed=7):
        import numpy as np

        return set(np.random.default_rng([seed, r, 99]).choice(1000, size=100 + 50 * r, replace=False).tolist())


class Launcher(unittest.TestCase):
    def test_world_size_mismatch_names_the_field(self):
        with tempfile.TemporaryDirectory() as d:
            # rank 1 claims 3 workers: whichever rank joins second is refused ("job 1 has N workers,
            # this member says M"), or rank 1 times out waiting for a third; the launcher names the rank
            r = train_py(2, "switchml", "misc_worker.py", ["--out", d, "--mode", "workers=3"])
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertRegex(r.stderr, r"worker rank \d .* exited with status 4")
            reps = []
            for name in sorted(os.listdir(d)):
                with open(os.path.join(d, name)) as f:
                    reps.append(json.load(f))
            self.assertGreaterEqual(len(reps), 1)
            for rep in reps:
                self.assertRegex(rep["error"], r"(has \d workers, this member says \d|\d of 3 workers joined)")
                self.assertLess(rep["seconds"], 3.0 + 2.0)

    def test_interrupt_stops_every_rank(self):
        with tempfile.TemporaryDirectory() as d:
            cmd = [INA, "train-py", "--workers", "2", "--scheme", "dsa", os.path.join(HERE, "misc_worker.py"), "--",
                   "--out", d, "--mode", "sleep"]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            pids = []
            deadline = time.monotonic() + 20
            while len(pids) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
                pids = []
                for r in range(2):
                    try:
                        with open(os.path.join(d, f"rank{r}.pid")) as f:
                            pids.append(int(f.read()))
                    except (OSError, ValueError):
                        pass
            self.assertEqual(len(pids), 2)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=15)
            self.assertEqual(p.returncode, 130, err)
            self.assertIn("interrupted by signal 2", err)
            for pid in pids:
                with self.assertRaises(ProcessLookupError):
                    os.kill(pid, 0)


class Paths(unittest.TestCase):
    """What a user of `ina train-py` meets first: the order of arguments, the package's path, a failing script,
    a script without comm.close(), the help and the version; allreduce_sparse's argument checks."""

    @classmethod
    def setUpClass(cls):
        # PYTHONPATH points elsewhere: the launcher must put the package's directory first; "--" hands
        # "--workers 5" to the script
        cls.dir = tempfile.TemporaryDirectory()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = "/nonexistent-elsewhere"
        cmd = [INA, "train-py", "--workers", "2", "--scheme", "switchml", "--timeout", "60",
               os.path.join(HERE, "misc_worker.py"), "--", "--out", cls.dir.name, "--mode", "info", "--workers", "5"]
        cls.run_ = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env)
        cls.reps = reports(cls.dir.name, 2) if cls.run_.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def info(self):
        self.assertEqual(self.run_.returncode, 0, self.run_.stdout + self.run_.stderr)
        return self.reps

    def test_scripts_import_the_package_beside_the_binary_first(self):
        pkg = os.path.realpath(os.path.join(os.path.dirname(os.path.realpath(INA)), "python"))
        for rep in self.info():
            first, rest = rep["pythonpath"].split(":", 1)
            self.assertEqual((os.path.realpath(first), rest), (pkg, "/nonexistent-elsewhere"))
            self.assertEqual(os.path.realpath(rep["ina_file"]), os.path.join(pkg, "ina", "__init__.py"))

    def test_dash_dash_hands_our_option_names_to_the_script(self):
        for rep in self.info():
            self.assertEqual(rep["argv"], ["--out", self.dir.name, "--mode", "info", "--workers", "5"])
            self.assertEqual(rep["size"], 2)  # ina's --workers 2, not the script's
            self.assertEqual(rep["sum"], [0.0, 2.0, 4.0, 6.0, 8.0])

    def test_option_after_the_script_is_refused_naming_it(self):
        script = os.path.join(HERE, "misc_worker.py")
        for flag in (["--workers", "2"], ["--workers=2"], ["--scheme", "dsa"]):
            t0 = time.monotonic()
            r = subprocess.run([INA, "train-py", script, *flag, "--out", "/nonexistent"], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(f"'{flag[0]}' comes after the script '{script}'", r.stderr)
            self.assertIn("put ina's options before the script", r.stderr)
            self.assertIn("write '--' right after the script", r.stderr)
            self.assertLess(time.monotonic() - t0, 5)  # refused before anything started
        r = subprocess.run([INA, "train-py", "--wokers", "2", script], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("unknown option '--wokers'", r.stderr)

    def test_sparse_arguments_are_refused_naming_them(self):
        for rep in self.info():
            e = rep["errors"]
            for name in ("float_keys", "negative_keys", "list_of_floats", "float_key_space"):
                self.assertEqual(e[name]["type"], "ArgumentError", name)
                self.assertTrue(e[name]["is_type_error"], name)
            self.assertIn("allreduce_sparse: keys must be integers (uint64), got dtype float64: float keys would be "
                          "truncated", e["float_keys"]["message"])
            self.assertIn("keys must be >= 0, got -2 at index 1", e["negative_keys"]["message"])
            self.assertIn("key_space must be an integer in 0..2^64-1, got 1000.0", e["float_key_space"]["message"])
            huge = e["huge_key_space"]
            self.assertEqual(huge["type"], "Error")
            self.assertRegex(huge["message"], r"key_space 4611686018427387904 needs about .* \(16 B per key.*"
                                              r"more than the available memory .* \(MemAvailable\)")
            self.assertLess(huge["seconds"], 1.0)  # refused, not allocated
            self.assertEqual((rep["sparse_keys"], rep["sparse_values"]), ([3, 70], [2.0, 2.0]))
            self.assertEqual((rep["empty_rank_keys"], rep["empty_rank_values"]), ([5], [1.0]))

    def test_failed_script_is_named_last_with_its_own_words(self):
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory() as d:
            r = train_py(2, "dsa", "misc_worker.py", ["--out", d, "--mode", "fail"])
        self.assertEqual(r.returncode, 1, r.stderr)
        # the failed rank left without closing: the job was aborted at once, rank 0 did not wait for it
        self.assertLess(time.monotonic() - t0, 20)
        lines = r.stderr.rstrip("\n").split("\n")
        self.assertEqual(lines[-1], "  | ValueError: boom from rank 1", r.stderr)
        head = [i for i, l in enumerate(lines) if l.startswith("ina train-py: worker rank 1 (")]
        self.assertEqual(len(head), 1, r.stderr)
        self.assertRegex(lines[head[0]], r"^ina train-py: worker rank 1 \(.*misc_worker\.py\) \(pid \d+\) exited with "
                                         r"status 1; the end of its standard error:$")
        self.assertIn("  | rank 1 is about to fail", lines[head[0]:])
        self.assertTrue(all(l.startswith("  | ") for l in lines[head[0] + 1:]), r.stderr)

    def test_script_that_exits_with_a_failure_status_leaves_without_closing(self):
        # rank 1 catches its error and calls sys.exit(1): a close at exit would wait for rank 0,
        # which waits in an allreduce for rank 1 (until its 60 s progress timeout)
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory() as d:
            r = train_py(2, "dsa", "misc_worker.py", ["--out", d, "--mode", "fail-exit"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertLess(time.monotonic() - t0, 20)
        self.assertIn("  | rank 1 caught boom from rank 1", r.stderr)

    def test_ddp_script_without_close_finishes_its_job(self):
        with tempfile.TemporaryDirectory() as d:
            summary = os.path.join(d, "summary.json")
            r = train_py(2, "dsa", "misc_worker.py", ["--out", d, "--mode", "ddp-noclose"], extra=["--json", summary])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            reps = reports(d, 2)
            with open(summary) as f:
                s = json.load(f)
        self.assertTrue(s["ok"], s["problems"])
        self.assertEqual((s["switch"]["jobs"]["finished"], s["switch"]["jobs"]["aborted"]), (1, 0))
        self.assertEqual([rep["ops"] for rep in reps], [3, 3])
        self.assertEqual(reps[0]["digest"], reps[1]["digest"])

    def test_script_without_close_is_closed_at_exit(self):
        # a daemon thread still holds the communicator when the script ends: only the exit handler closes it
        with tempfile.TemporaryDirectory() as d:
            summary = os.path.join(d, "summary.json")
            r = train_py(2, "dsa", "misc_worker.py", ["--out", d, "--mode", "noclose-thread"], extra=["--json", summary])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(summary) as f:
                s = json.load(f)
        self.assertEqual((s["switch"]["jobs"]["finished"], s["switch"]["jobs"]["aborted"]), (1, 0))

    def test_a_module_runs_with_dash_m_as_with_python(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([INA, "train-py", "--workers", "2", "--scheme", "switchml", "--timeout", "60", "-m",
                                "misc_worker", "--out", d, "--mode", "noclose-thread"], capture_output=True, text=True,
                               timeout=90, cwd=HERE)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = subprocess.run([INA, "train-py", "-m"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("-m needs the module to run", r.stderr)

    def test_help_lists_only_the_schemes_it_runs(self):
        r = subprocess.run([INA, "train-py", "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = set(re.findall(r"^\s{2,}([a-z][a-z0-9-]*)(?:\|[a-z0-9|-]+)?\s{2,}", r.stdout, re.M))
        self.assertTrue({"switchml", "atp", "dsa", "zebra", "ps-lite"} <= listed, r.stdout)
        self.assertFalse({"rar", "h-ar", "rina"} & listed, r.stdout)
        r = subprocess.run([INA, "train-py", "--scheme", "rar", os.path.join(HERE, "misc_worker.py")],
                           capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("train-py runs a scheme with one switch", r.stderr + r.stdout)

    def test_version_is_one_string(self):
        r = subprocess.run([INA, "--version"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), f"ina {ina.__version__}")
        self.assertRegex(ina.__version__, r"^\d+\.\d+\.\d+$")


class Ddp(unittest.TestCase):
    """DDP with the ina hook against DDP over gloo, same seeds, same processes (examples/ddp_fashion_mnist.py)."""

    def test_hook_matches_gloo(self):
        lr, k, n = 0.05, 5, 2
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "ddp.json")
            cmd = [INA, "train-py", "--workers", str(n), "--scheme", "switchml", "--timeout", "150",
                   os.path.join(SOURCE, "examples", "ddp_fashion_mnist.py"), "--", "--epochs", "1",
                   "--limit-train", "4096", "--limit-test", "1000", "--lr", str(lr), "--momentum", "0",
                   "--compare-steps", str(k), "--json", out]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(out) as f:
                rep = json.load(f)
        ina_run, gloo_run = rep["runs"]["ina"], rep["runs"]["gloo"]
        steps = ina_run["steps_per_epoch"]
        self.assertEqual(steps, 4096 // (64 * n))
        # the hook averaged every step's buckets (one bucket per step here: the model is far below 25 MB)
        self.assertEqual(ina_run["hook_ops"], steps)
        self.assertEqual(len(set(ina_run["digests"])), 1)  # the same bits on every rank
        # Parameters after k plain-SGD steps. Per step and value the ina mean differs from the exact
        # mean by <= 0.5 / s (fixed point, scale s of that op) and each side's float32 rounding by
        # <= 3 * 2^-24 * max|g|, with max|g| < 2^32 / (n s) (s is the largest power of two with
        # max|g| s <= INT32_MAX / n - 1): e = (0.5 + 3 * 2^8 / n) / s. The update p - lr g adds
        # <= 2^-24 max|p| per step on each side. Bound: lr * sum e + k * 2^-23 * max|p|, doubled
        # for the drift of the gradients themselves over so few steps.
        ops = rep["compare"]["ops"]
        self.assertEqual(len(ops), k)
        bound = 2 * (lr * sum((0.5 + 3 * 256 / n) / o["scale"] for o in ops)
                     + k * 2.0 ** -23 * rep["compare"]["max_abs_param"])
        self.assertLessEqual(rep["compare"]["max_abs_diff"], bound)
        # accuracy after the short run within 0.5 percentage points
        acc_ina = ina_run["epochs"][-1]["test_accuracy"]
        acc_gloo = gloo_run["epochs"][-1]["test_accuracy"]
        self.assertLessEqual(abs(acc_ina - acc_gloo) * 100, 0.5)


if __name__ == "__main__":
    unittest.main()
