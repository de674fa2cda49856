// zeus_cpp._core: the C++ engine under the zeus_cpp package.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "zeus/config.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "zeus-cpp's engine (zeus_core) for the zeus_cpp package; use zeus_cpp, not this";
  m.attr("__version__") = ZEUS_VERSION;
  zeus::python::bind_errors(m);
  zeus::python::bind_cluster(m);
  zeus::python::bind_job(m);
  zeus::python::bind_device(m);
  zeus::python::bind_monitor(m);
  zeus::python::bind_metrics(m);
  zeus::python::bind_grid(m);
}
