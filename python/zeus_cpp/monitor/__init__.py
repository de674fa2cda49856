"""Zeus 0.16's monitors over zeus-cpp's C++ engine: ``ZeusMonitor`` (energy windows) and
``PowerMonitor`` (power timelines, ``PowerDomain``). They only measure."""

from zeus_cpp.monitor.energy import Measurement, ZeusMonitor
from zeus_cpp.monitor.power import PowerDomain, PowerMonitor

__all__ = ["Measurement", "PowerDomain", "PowerMonitor", "ZeusMonitor"]
