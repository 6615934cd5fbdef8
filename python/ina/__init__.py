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
import importlib
import json
import os

from ._ina import Error, NonFiniteError
from . import _ina

__all__ = ["Communicator", "Error", "NonFiniteError", "resolve_config"]


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

        values = np.asarray(_array(values))
        if values.dtype == np.int32:
            return self._c.allreduce_sparse_int32(keys, values, op, key_space)
        if values.dtype == np.float32:
            return self._c.allreduce_sparse_float(keys, values, op, key_space)
        raise TypeError(f"allreduce_sparse: expected float32 or int32 values, got {values.dtype}")

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
        """Waits for outstanding ops, then for every worker of the job. Idempotent."""
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def __getattr__(name):
    # `ina.torch` loads torch only when asked for.
    if name == "torch":
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'ina' has no attribute {name!r}")
