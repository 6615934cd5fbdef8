"""test_ina's misbehaving ranks (started by `ina train-py`).

--mode workers=K: rank 1 joins claiming K workers (the launcher started another
    number), the others as told; each writes the ina.Error's message and how long
    it took to rank<R>.json, exits 4.
--mode sleep: writes its pid to rank<R>.pid, then sleeps (the launcher is interrupted).
"""
import argparse
import json
import os
import sys
import time

import ina


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", required=True)
    args = ap.parse_args()
    rank = int(os.environ["RANK"])
    if args.mode == "sleep":
        with open(os.path.join(args.out, f"rank{rank}.pid"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(120)
        return 0
    if args.mode.startswith("workers="):
        t0 = time.monotonic()
        try:
            cfg = {"rendezvous_timeout_ms": 3000}
            if rank == 1:
                cfg["workers"] = int(args.mode.split("=")[1])
            ina.Communicator(cfg)
            message = None
        except ina.Error as e:
            message = str(e)
        with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
            json.dump({"error": message, "seconds": time.monotonic() - t0}, f)
        return 4
    sys.exit(f"unknown --mode {args.mode}")


if __name__ == "__main__":
    sys.exit(main())
