"""test_ina's misbehaving ranks (started by `ina train-py`).

--mode workers=K: rank 1 joins claiming K workers (the launcher started another
    number), the others as told; each writes the ina.Error's message and how long
    it took to rank<R>.json, exits 4.
--mode sleep: writes its pid to rank<R>.pid, then sleeps (the launcher is interrupted).
--mode info: joins, checks allreduce_sparse's argument checks, runs one allreduce and writes its argv,
    PYTHONPATH, ina.__file__, ina.__version__ and the checks' errors to rank<R>.json; closes.
--mode fail: joins; rank 1 then prints a line and dies of an uncaught ValueError while rank 0 waits
    in an allreduce.
--mode fail-exit: as fail, but rank 1 catches its error and calls sys.exit(1).
--mode noclose-thread: joins, runs one allreduce and ends without comm.close() while a daemon thread
    still holds the communicator (so only the exit handler can close it).
--mode ddp-noclose: a DDP model with the ina hook (gloo process group) trains 3 steps and the script
    ends without comm.close() (the gloo group destroyed); writes rank<R>.json first.
"""
import argparse
import json
import os
import sys
import threading
import time

import numpy as np

import ina


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--workers", type=int, help="an option name of ina train-py's, handed to the script after --")
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
    if args.mode == "info":
        return info(args, rank)
    if args.mode == "fail":
        comm = ina.Communicator()
        if rank == 1:
            print("rank 1 is about to fail", file=sys.stderr, flush=True)
            raise ValueError("boom from rank 1")
        comm.allreduce(np.ones(4, dtype=np.float32))
        return 0
    if args.mode == "fail-exit":
        comm = ina.Communicator()
        if rank == 1:
            try:
                raise ValueError("boom from rank 1")
            except ValueError as e:
                print(f"rank 1 caught {e}", file=sys.stderr, flush=True)
                sys.exit(1)
        comm.allreduce(np.ones(4, dtype=np.float32))
        return 0
    if args.mode == "noclose-thread":
        comm = ina.Communicator()
        comm.allreduce(np.ones(4, dtype=np.float32))
        threading.Thread(target=lambda c=comm: time.sleep(3600), daemon=True).start()
        return 0
    if args.mode == "ddp-noclose":
        return ddp_noclose(args, rank)
    sys.exit(f"unknown --mode {args.mode}")


def info(args, rank):
    comm = ina.Communicator()
    errors = {}
    values = np.ones(3, dtype=np.float32)
    cases = {"float_keys": (np.array([1.0, 2.5, 7.0]), 0), "negative_keys": (np.array([1, -2, 7]), 0),
             "list_of_floats": ([0.5, 1.5, 2.5], 100), "float_key_space": (np.array([1, 2, 7], dtype=np.uint64), 1e3),
             "huge_key_space": (np.array([1, 2, 7], dtype=np.uint64), 2**62)}
    for name, (keys, key_space) in cases.items():
        t0 = time.monotonic()
        try:
            comm.allreduce_sparse(keys, values, key_space=key_space)
            errors[name] = None
        except ina.Error as e:
            errors[name] = {"type": type(e).__name__, "message": str(e), "is_type_error": isinstance(e, TypeError),
                            "seconds": time.monotonic() - t0}
    # int64 keys (numpy's default integer) are fine, and the communicator still works
    k, v, _ = comm.allreduce_sparse(np.array([3, 70]), np.ones(2, dtype=np.float32), key_space=100)
    # a rank with no keys this time passes an empty list (numpy makes it float64)
    ke, ve, _ = comm.allreduce_sparse([] if rank == 1 else [5], np.ones(0 if rank == 1 else 1, dtype=np.float32),
                                      key_space=100)
    x = np.arange(5, dtype=np.float32)
    comm.allreduce(x)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump({"argv": sys.argv[1:], "pythonpath": os.environ.get("PYTHONPATH"), "ina_file": ina.__file__,
                   "version": ina.__version__, "errors": errors, "sparse_keys": k.tolist(), "sparse_values": v.tolist(),
                   "empty_rank_keys": ke.tolist(), "empty_rank_values": ve.tolist(),
                   "sum": x.tolist(), "size": comm.size}, f)
    comm.close()
    return 0


KEEP = None


def ddp_noclose(args, rank):
    import torch
    import torch.distributed as dist
    import ina.torch

    torch.manual_seed(1)
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    comm = ina.Communicator()
    model.register_comm_hook(comm, ina.torch.allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(10 + rank)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(16, 8, generator=g)).square().mean().backward()
        opt.step()
    digest = float(sum(p.detach().double().sum() for p in model.parameters()))
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump({"digest": digest, "ops": len(ina.torch.hook_infos(comm))}, f)
    global KEEP
    KEEP = (model, comm)  # alive until the interpreter exits, as a tutorial script's globals
    # No comm.close(). The gloo group is destroyed: PyTorch's own gloo
    # threads may abort an exit without it ("terminate called without an
    # active exception", pytorch/pytorch#190489), which is not ina's to test.
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
