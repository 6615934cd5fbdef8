"""PyTorch integration: a DDP communication hook and a helper for scripts without DDP.

    import ina, ina.torch
    comm = ina.Communicator()                                   # from `ina train-py`'s environment
    ddp_model.register_comm_hook(comm, ina.torch.allreduce_hook)

Each gradient bucket is averaged through the switch (float32 CPU buckets):
fixed point with a scale agreed by all workers, exact int32 sums, so the
result differs from the exact mean by at most 0.5 / scale per value (plus
float32 rounding of the decode), and every worker gets the same bits.
"""
import queue
import threading

import torch

from . import Communicator

__all__ = ["allreduce_hook", "average_gradients", "hook_infos"]


class _Completer:
    """Finishes the hook's futures in issue order, on one thread per communicator (waits release the GIL)."""

    def __init__(self):
        self.q = queue.SimpleQueue()
        self.infos = []  # each finished bucket's info (scale, retried, elapsed_s), in order
        self.t = threading.Thread(target=self._run, name="ina-hook", daemon=True)
        self.t.start()

    def _run(self):
        while True:
            handle, fut, tensor = self.q.get()
            try:
                handle.wait()
                self.infos.append(handle.info)
                fut.set_result(tensor)
            except BaseException as e:  # the future carries the communicator's error to DDP
                fut.set_exception(e)
            # While it waits for the next bucket this thread holds nothing: a handle keeps its
            # communicator alive, which must go (and close) with the last reference to it.
            del handle, fut, tensor


def _completer(comm):
    c = getattr(comm, "_ina_completer", None)
    if c is None:
        c = comm._ina_completer = _Completer()
    return c


def hook_infos(comm):
    """The info dicts (scale, retried, elapsed_s) of every bucket the hook has averaged through comm, in order."""
    c = getattr(comm, "_ina_completer", None)
    return list(c.infos) if c else []


def allreduce_hook(state, bucket):
    """DDP communication hook: the bucket's mean over the workers, through ina.

    state: the ina.Communicator (model.register_comm_hook(comm, ina.torch.allreduce_hook)).
    Returns a torch.futures.Future holding the averaged bucket, as DDP requires.
    """
    if not isinstance(state, Communicator):
        raise TypeError(f"ina.torch.allreduce_hook: state must be an ina.Communicator, got {type(state).__name__}")
    buf = bucket.buffer()
    if buf.dtype != torch.float32:
        raise TypeError(f"ina.torch.allreduce_hook: gradients must be float32, got {buf.dtype}")
    fut = torch.futures.Future()
    handle = state.allreduce_async(buf, op="average")
    _completer(state).q.put((handle, fut, buf))
    return fut


def average_gradients(params, comm):
    """Without DDP: after backward(), replace every parameter's .grad by its mean over the workers.

    params: a module or an iterable of parameters. One allreduce of all
    gradients (flattened into one float32 buffer). Returns its info dict.
    """
    if isinstance(params, torch.nn.Module):
        params = params.parameters()
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        raise ValueError("ina.torch.average_gradients: no parameter has a gradient (call backward() first)")
    flat = torch.cat([g.detach().reshape(-1).to(torch.float32) for g in grads])
    info = comm.allreduce(flat, op="average")
    at = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[at:at + n].view_as(g))
        at += n
    return info
