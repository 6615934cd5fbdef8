"""ina from Python: allreduce through an `ina switch` (in-network aggregation).

    import ina
    comm = ina.Communicator()            # INA_* / INA_CONFIG, or torchrun's RANK and WORLD_SIZE
    comm.allreduce(grad)                 # in place: the sum over all workers (float32 or int32)
    h = comm.allreduce_async(other)      # returns at once
    h.wait()

`ina.torch` has the DDP communication hook (`allreduce_hook`) and
`average_gradients(model, comm)` for scripts without DDP. The module wraps
the C++ `ina::Communicator` (src/runtime/communicator.hpp): floats travel as
int32 fixed point with an agreed scale and are summed exactly, so every
worker gets bit-identical results equal to decode(sum of encode(x)).
"""
import atexit
import importlib
import json
import numbers
import os
import sys
import weakref

from ._ina import Error, NonFiniteError
from . import _ina

__all__ = ["ArgumentError", "Communicator", "Error", "NonFiniteError", "resolve_config", "__version__"]

__version__ = _ina.__version__  # CMake's project version, as `ina --version` prints


class ArgumentError(Error, TypeError):
    """A bad argument of an ina call (a key dtype, a negative key, a key_space): an ina.Error, also a TypeError."""


def _text(key, value):
    # The C++ setters parse text, as they do for TOML and INA_* (one parser).
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value) if not isinstance(value, float) else repr(value)
    raise TypeError(f"config dict: {key}: expected a number, a boolean or a string, got {type(value).__name__}")


def _settings(config):
    """A dict ({"switch": ..., "rank": 0, "faults": {"loss": 0.01}}) as (key, text) pairs."""
    out = []
    for key, value in config.items():
        if isinstance(value, dict):
            out.extend((f"{key}.{k}", _text(f"{key}.{k}", v)) for k, v in value.items())
        else:
            out.append((str(key), _text(key, value)))
    return out


def _torchrun():
    """torchrun's RANK and WORLD_SIZE, where INA_RANK / INA_WORKERS are unset."""
    out = []
    for ours, theirs, key in (("INA_RANK", "RANK", "rank"), ("INA_WORKERS", "WORLD_SIZE", "workers")):
        if ours not in os.environ and theirs in os.environ:
            out.append((key, os.environ[theirs]))
    return out


def _sources(config):
    if config is None:
        return _torchrun(), None, []
    if isinstance(config, dict):
        return _torchrun(), None, _settings(config)
    if isinstance(config, (str, os.PathLike)):
        return _torchrun(), os.fspath(config), []
    raise TypeError(f"ina.Communicator: config must be None, a dict or a TOML file's path, got {type(config).__name__}")


def resolve_config(config=None):
    """The configuration a Communicator(config) would use, as a dict (raises ina.Error naming a bad field)."""
    return json.loads(_ina.resolve_config(*_sources(config)))


def _array(x):
    """A numpy array sharing x's memory: x itself, or a CPU torch tensor's .numpy()."""
    if hasattr(x, "numpy") and hasattr(x, "is_contiguous"):  # a torch tensor
        if x.device.type != "cpu":
            raise ValueError(f"allreduce: the tensor is on {x.device}; ina reduces CPU tensors")
        if not x.is_contiguous():
            raise ValueError("allreduce: the tensor must be contiguous (it is reduced in place)")
        return x.detach().numpy()
    return x


class Communicator:
    """One worker of an ina job (joins on construction; raises ina.Error naming the switch or field).

    config: None (the environment: INA_CONFIG, INA_*; RANK / WORLD_SIZE stand in for
    INA_RANK / INA_WORKERS), a dict of the TOML keys ({"switch": "127.0.0.1:7700",
    "rank": 0, "workers": 2, "faults": {"loss": 0.01}}), or a TOML file's path.
    A dict or file overrides the environment.
    """

    def __init__(self, config=None):
        self._c = _ina.Communicator(*_sources(config))
        _open.add(self._c)

    def allreduce(self, x, op="sum"):
        """In place: x becomes the sum (op="average": the mean) over all workers. Returns info (scale, ...)."""
        return self._c.allreduce(_array(x), op)

    def allreduce_async(self, x, op="sum"):
        """Starts an allreduce of x in place; the returned handle's wait() finishes it. Leave x alone until then.

        A handle dropped before wait() waits for its op (its error is lost): the op writes into x until it ends.
        """
        return self._c.allreduce_async(_array(x), op)

    def allreduce_sparse(self, keys, values, op="sum", key_space=0):
        """Sum of every worker's <key, value> pairs: (keys, values, info) for the union of the keys.

        keys: strictly ascending uint64; values: float32 or int32, one per key. key_space: the model's
        size, required on dense schemes (switchml, atp, dsa), ignored by zebra and ps-lite.
        """
        import numpy as np

        keys = _keys(keys)
        if isinstance(key_space, bool) or not isinstance(key_space, numbers.Integral) or not 0 <= key_space < 2**64:
            raise ArgumentError(f"allreduce_sparse: key_space must be an integer in 0..2^64-1, got {key_space!r}")
        values = np.asarray(_array(values))
        if values.dtype == np.int32:
            return self._c.allreduce_sparse_int32(keys, values, op, key_space)
        if values.dtype == np.float32:
            return self._c.allreduce_sparse_float(keys, values, op, key_space)
        raise TypeError(f"allreduce_sparse: expected float32 or int32 values, got {values.dtype}")

    def set_hot_keys(self, ranked):
        """Zebra: the job's hot set from the next sparse op on; returns the switch table's version.

        ranked: uint64 keys, hottest first (at most the switch's table). A collective: every worker
        calls it at the same point of its ops with the same list. Returns 0 (and does nothing) on a
        scheme without a hot-set table; a switch that refuses the list raises ina.Error with its reason.
        """
        keys = _keys(ranked, "set_hot_keys")
        if len(set(keys.tolist())) != keys.size:
            raise ArgumentError("set_hot_keys: a key appears twice in the ranked list")
        return self._c.set_hot_keys(keys)

    def abandon(self):
        """Leaves the job without closing: the switch aborts it at once (for a failing process). Idempotent."""
        _open.discard(self._c)
        self._c.abandon()

    def stats(self):
        """Transport and engine statistics (a snapshot) as a dict."""
        return json.loads(self._c.stats_json())

    @property
    def config(self):
        return json.loads(self._c.config_json())

    @property
    def rank(self):
        return self._c.rank

    @property
    def size(self):
        return self._c.size

    @property
    def scheme(self):
        return self._c.scheme

    @property
    def payload_values(self):
        return self._c.payload_values

    def close(self):
        """Waits for outstanding ops, then for every worker of the job. Idempotent.

        A script that never calls it is closed at interpreter exit (a normal exit, sys.exit included):
        the rank has left after its last op, it has not crashed. After an uncaught exception it leaves
        the job without closing (abandon()), so that the switch aborts the job at once and the other
        ranks fail fast.
        """
        _open.discard(self._c)
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _keys(keys, what="allreduce_sparse"):
    """keys as a uint64 array; non-integer or negative keys raise ArgumentError (numpy would truncate or wrap them)."""
    import numpy as np

    k = np.asarray(_array(keys))
    if k.size == 0:  # a rank with no keys this iteration (numpy makes [] float64)
        return np.empty(0, np.uint64)
    if k.dtype.kind not in "ui":
        raise ArgumentError(f"{what}: keys must be integers (uint64), got dtype {k.dtype}"
                            + (": float keys would be truncated" if k.dtype.kind == "f" else ""))
    if k.dtype.kind == "i" and k.size and k.min() < 0:
        i = int(np.argmax(k < 0))
        raise ArgumentError(f"{what}: keys must be >= 0, got {int(k[i])} at index {i}")
    return k.astype(np.uint64, copy=False)


# The native communicators not yet closed, closed at a normal interpreter exit
# (Communicator.close). The native object, not the wrapper: an async op's handle
# keeps it alive (and joined) after the wrapper is gone, e.g. the last handle
# the DDP hook's completer thread held when its model was dropped.
_open = weakref.WeakSet()

# The status a script gave sys.exit (None: it did not call it). An exit handler is not told
# how the interpreter ends, and a script that catches its error and calls sys.exit(1) has
# failed as surely as one that raises: its communicators leave at once (abandon), before the
# exit unwinds the frames that hold them (a communicator dropped there would close, waiting
# for the other ranks, which wait for this one). `raise SystemExit(1)` itself is not seen.
_exit_status = None
_sys_exit = sys.exit


def _recording_exit(status=None):
    global _exit_status
    _exit_status = status
    if status not in (None, 0):
        for comm in list(_open):
            _open.discard(comm)
            comm.abandon()
    _sys_exit(status)


sys.exit = _recording_exit


def _close_at_exit():
    # A failed script (an uncaught exception sets sys.last_value; or sys.exit with a non-zero
    # status or a message) leaves without closing, so that the switch aborts the job now and
    # the other ranks fail fast (a close would wait for them, and they for this rank's next op).
    if getattr(sys, "last_value", None) is not None or _exit_status not in (None, 0):
        for comm in list(_open):
            comm.abandon()
        return
    for comm in list(_open):
        try:
            comm.close()
        except Error as e:
            print(f"ina: closing the communicator at exit failed: {e}", file=sys.stderr)


atexit.register(_close_at_exit)


def __getattr__(name):
    # `ina.torch` loads torch only when asked for.
    if name == "torch":
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'ina' has no attribute {name!r}")
