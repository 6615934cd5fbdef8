// The `ina` Python package's native part (`ina._ina`, pybind11): ina::Communicator
// over numpy arrays / the buffer protocol, in place. python/ina/__init__.py
// wraps it (torch tensors through .numpy(), config sources, statistics as a dict).
// No torch here: the module builds in seconds and loads without libtorch.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/communicator.hpp"

namespace py = pybind11;

namespace {

using Settings = std::vector<std::pair<std::string, std::string>>;

// The configuration of a Python Communicator: INA_CONFIG and INA_* first, then
// `torchrun` (settings the Python side derived from RANK / WORLD_SIZE where the
// INA_* variable is unset), then a TOML file, then the dict's settings.
ina::CommConfig make_config(const Settings& torchrun, const std::optional<std::string>& toml_path,
                            const Settings& settings) {
  ina::CommConfig c = ina::CommConfig::from_env();
  c = ina::CommConfig::from_settings(torchrun, "environment (torchrun)", std::move(c));
  if (toml_path) c = ina::CommConfig::from_toml_file(*toml_path, std::move(c));
  c = ina::CommConfig::from_settings(settings, "config dict", std::move(c));
  c.validate();
  return c;
}

// A writable, C-contiguous float32 or int32 array, as its element span.
struct Buffer {
  py::array array;
  bool is_float = true;
  size_t size = 0;
  void* data = nullptr;
};

Buffer buffer_of(const py::object& obj) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error("allreduce: expected a numpy array or a CPU torch tensor, got " +
                         py::str(py::handle(obj.get_type())).cast<std::string>());
  Buffer b;
  b.array = py::reinterpret_borrow<py::array>(obj);
  const py::dtype dt = b.array.dtype();
  if (dt.is(py::dtype::of<float>())) b.is_float = true;
  else if (dt.is(py::dtype::of<int32_t>())) b.is_float = false;
  else
    throw py::type_error("allreduce: expected dtype float32 or int32, got " + py::str(py::handle(dt)).cast<std::string>());
  if (!(b.array.flags() & py::array::c_style))
    throw py::value_error("allreduce: the array must be C-contiguous (it is reduced in place)");
  if (!b.array.writeable()) throw py::value_error("allreduce: the array is read-only (it is reduced in place)");
  b.size = static_cast<size_t>(b.array.size());
  b.data = b.array.mutable_data();
  return b;
}

ina::AllreduceOptions options(const std::string& op) {
  ina::AllreduceOptions o;
  if (op == "sum") o.op = ina::ReduceOp::Sum;
  else if (op == "average") o.op = ina::ReduceOp::Average;
  else throw py::value_error("allreduce: op must be 'sum' or 'average', got '" + op + "'");
  return o;
}

py::dict info_dict(const ina::AllreduceInfo& i) {
  py::dict d;
  d["scale"] = i.scale;
  d["retried"] = i.retried;
  d["elapsed_s"] = static_cast<double>(i.elapsed) / static_cast<double>(ina::kSec);
  return d;
}

// An asynchronous allreduce: the C++ request and the array it writes into
// (kept alive until the handle goes). A handle dropped before its op
// finished waits for it (without the GIL, its error swallowed): the op
// writes into the array until then, so the array must outlive it.
struct Handle {
  ina::Communicator::Request req;
  py::array array;
  Handle() = default;
  Handle(Handle&&) = default;
  Handle& operator=(Handle&&) = delete;
  Handle(const Handle&) = delete;
  ~Handle() {
    if (!req.valid() || req.test()) return;
    py::gil_scoped_release nogil;
    try {
      req.wait();
    } catch (...) {  // nobody is left to raise it to
    }
  }
  void wait() {
    py::gil_scoped_release nogil;
    req.wait();
  }
};

template <typename T>
// keys: uint64 only (no forcecast: a float key would be truncated; the package refuses
// other dtypes with ina.ArgumentError before converting).
py::tuple sparse(ina::Communicator& c, py::array_t<uint64_t, py::array::c_style> keys,
                 py::array_t<T, py::array::c_style | py::array::forcecast> values, const std::string& op, uint64_t key_space) {
  if (keys.ndim() != 1 || values.ndim() != 1 || keys.size() != values.size())
    throw py::value_error("allreduce_sparse: keys and values must be 1-D arrays of the same length, got " +
                          std::to_string(keys.size()) + " keys and " + std::to_string(values.size()) + " values");
  ina::SparseOptions o;
  o.op = options(op).op;
  o.key_space = key_space;
  ina::SparseResult<T> r;
  {
    std::span<const uint64_t> k(keys.data(), static_cast<size_t>(keys.size()));
    std::span<const T> v(values.data(), static_cast<size_t>(values.size()));
    py::gil_scoped_release nogil;
    r = c.allreduce_sparse(k, v, o);
  }
  py::array_t<uint64_t> rk(static_cast<py::ssize_t>(r.keys.size()));
  py::array_t<T> rv(static_cast<py::ssize_t>(r.values.size()));
  if (!r.keys.empty()) std::memcpy(rk.mutable_data(), r.keys.data(), r.keys.size() * sizeof(uint64_t));
  if (!r.values.empty()) std::memcpy(rv.mutable_data(), r.values.data(), r.values.size() * sizeof(T));
  return py::make_tuple(rk, rv, info_dict(r.info));
}

// Destroying a communicator closes it (waits for the job's other workers):
// without the GIL, so that other Python threads run meanwhile.
struct ReleaseGilDelete {
  void operator()(ina::Communicator* c) const {
    py::gil_scoped_release nogil;
    delete c;
  }
};
using CommPtr = std::unique_ptr<ina::Communicator, ReleaseGilDelete>;

}  // namespace

PYBIND11_MODULE(_ina, m) {
  m.doc() = "ina's native module: ina::Communicator over numpy arrays (use the `ina` package)";
  m.attr("__version__") = INA_VERSION;  // CMake's project version, as `ina --version`
  // Every error of the C++ API is an ina.Error (a RuntimeError) carrying its message.
  // (Translators are tried last registered first: NonFiniteError before its base.)
  const auto& error = py::register_exception<ina::RuntimeError>(m, "Error", PyExc_RuntimeError);
  py::register_exception<ina::NonFiniteError>(m, "NonFiniteError", error.ptr());

  m.def("resolve_config",
        [](const Settings& torchrun, const std::optional<std::string>& toml_path, const Settings& settings) {
          return make_config(torchrun, toml_path, settings).to_json().dump();
        },
        "The effective configuration (JSON text) from the environment, a TOML file and settings; raises ina.Error");

  py::class_<Handle>(m, "Handle", "An asynchronous allreduce; wait() blocks (GIL released) and raises its error")
      .def("wait", &Handle::wait)
      .def("test", [](const Handle& h) { return h.req.test(); }, "True once the op has finished; never blocks")
      .def_property_readonly("info", [](const Handle& h) { return info_dict(h.req.info()); });

  py::class_<ina::Communicator, CommPtr>(m, "Communicator")
      .def(py::init([](const Settings& torchrun, const std::optional<std::string>& toml_path, const Settings& settings) {
             const ina::CommConfig c = make_config(torchrun, toml_path, settings);
             py::gil_scoped_release nogil;  // joining waits for the other ranks
             return CommPtr(new ina::Communicator(c));
           }),
           py::arg("torchrun"), py::arg("toml_path"), py::arg("settings"))
      .def("allreduce",
           [](ina::Communicator& c, const py::object& obj, const std::string& op) {
             Buffer b = buffer_of(obj);
             const auto o = options(op);
             ina::AllreduceInfo info;
             {
               py::gil_scoped_release nogil;
               info = b.is_float ? c.allreduce(std::span<float>(static_cast<float*>(b.data), b.size), o)
                                 : c.allreduce(std::span<int32_t>(static_cast<int32_t*>(b.data), b.size), o);
             }
             return info_dict(info);
           },
           py::arg("array"), py::arg("op") = "sum")
      .def("allreduce_async",
           [](ina::Communicator& c, const py::object& obj, const std::string& op) {
             Buffer b = buffer_of(obj);
             const auto o = options(op);
             Handle h;
             h.array = b.array;
             {
               py::gil_scoped_release nogil;
               h.req = b.is_float ? c.allreduce_async(std::span<float>(static_cast<float*>(b.data), b.size), o)
                                  : c.allreduce_async(std::span<int32_t>(static_cast<int32_t*>(b.data), b.size), o);
             }
             return h;
           },
           py::arg("array"), py::arg("op") = "sum", py::keep_alive<0, 1>())
      .def("allreduce_sparse_float", &sparse<float>, py::arg("keys"), py::arg("values"), py::arg("op"), py::arg("key_space"))
      .def("allreduce_sparse_int32", &sparse<int32_t>, py::arg("keys"), py::arg("values"), py::arg("op"), py::arg("key_space"))
      .def("set_hot_keys",
           [](ina::Communicator& c, py::array_t<uint64_t, py::array::c_style> ranked) {
             if (ranked.ndim() != 1) throw py::value_error("set_hot_keys: keys must be a 1-D array");
             std::span<const uint64_t> k(ranked.data(), static_cast<size_t>(ranked.size()));
             py::gil_scoped_release nogil;
             return c.set_hot_keys(k);
           },
           py::arg("ranked"))
      .def("close", [](ina::Communicator& c) {
        py::gil_scoped_release nogil;
        c.close();
      })
      .def("abandon", [](ina::Communicator& c) {
        py::gil_scoped_release nogil;
        c.abandon();
      })
      .def("stats_json", [](const ina::Communicator& c) { return c.stats().dump(); })
      .def("config_json", [](const ina::Communicator& c) { return c.config().to_json().dump(); })
      .def_property_readonly("rank", &ina::Communicator::rank)
      .def_property_readonly("size", &ina::Communicator::size)
      .def_property_readonly("payload_values", &ina::Communicator::payload_values)
      .def_property_readonly("scheme", &ina::Communicator::scheme);
}
