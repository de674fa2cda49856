#include <Python.h>

#include <exception>

#include "bindings.h"
#include "zeus/common/errors.h"
#include "zeus/optimize/early_stop.h"

namespace py = pybind11;

namespace zeus::python {
namespace {

// Owned by the module (its attributes); plain pointers are what PyErr_SetString takes.
struct ErrorTypes {
  PyObject* base = nullptr;
  PyObject* config = nullptr;
  PyObject* device = nullptr;
  PyObject* permission = nullptr;
  PyObject* dist = nullptr;
  PyObject* io = nullptr;
  PyObject* internal = nullptr;
  PyObject* cost_threshold = nullptr;
};

ErrorTypes& types() {
  static ErrorTypes t;
  return t;
}

PyObject* new_type(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  const std::string qualified = std::string("zeus_cpp._core.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) {
    throw py::error_already_set();
  }
  m.add_object(name, py::handle(type));
  return type;
}

}  // namespace

void bind_errors(py::module_& m) {
  ErrorTypes& t = types();
  const auto bases = [](auto... b) { return py::make_tuple(py::handle(b)...); };
  t.base = new_type(m, "ZeusError", bases(PyExc_RuntimeError),
                    "Base of every error zeus-cpp raises; the message says what, where and what "
                    "to do.");
  t.config = new_type(m, "ConfigError", bases(t.base, PyExc_ValueError),
                      "A bad option, environment variable or file content.");
  t.device = new_type(m, "DeviceError", bases(t.base),
                      "A GPU or CPU energy counter failed or refused an operation.");
  t.permission = new_type(m, "DevicePermissionError", bases(t.device, PyExc_PermissionError),
                          "Changing a GPU's power limit needs privileges this process lacks.");
  t.dist = new_type(m, "DistError", bases(t.base), "A distributed-runtime failure.");
  t.io = new_type(m, "IoError", bases(t.base, PyExc_OSError),
                  "A file could not be read, written or parsed.");
  t.internal = new_type(m, "InternalError", bases(t.base), "A bug in zeus-cpp.");
  // args: (message, cost so far, predicted cost after the next epoch, threshold).
  t.cost_threshold = new_type(m, "CostThresholdExceeded", bases(t.base),
                              "The next epoch's predicted cost reaches ZEUS_COST_THRESH.");

  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) {
      return;
    }
    const ErrorTypes& e = types();
    try {
      std::rethrow_exception(p);
    } catch (const optimize::CostThresholdExceeded& err) {
      py::tuple args = py::make_tuple(err.what(), err.forecast().cost_so_far,
                                      err.forecast().predicted_cost, err.threshold());
      PyErr_SetObject(e.cost_threshold, args.ptr());
    } catch (const PermissionError& err) {
      PyErr_SetString(e.permission, err.what());
    } catch (const ConfigError& err) {
      PyErr_SetString(e.config, err.what());
    } catch (const DeviceError& err) {
      PyErr_SetString(e.device, err.what());
    } catch (const DistError& err) {
      PyErr_SetString(e.dist, err.what());
    } catch (const IoError& err) {
      PyErr_SetString(e.io, err.what());
    } catch (const InternalError& err) {
      PyErr_SetString(e.internal, err.what());
    } catch (const Error& err) {
      PyErr_SetString(e.base, err.what());
    }
  });
}

}  // namespace zeus::python
