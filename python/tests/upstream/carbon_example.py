# Carbon accounting written against upstream Zeus 0.16's zeus.monitor.carbon, in the style of its
# docs. The test runs it with nothing changed but the package name in the imports, against a
# local server that answers as ElectricityMaps does. The "work" is a sleep.
import json
import time

from zeus.monitor.carbon import CarbonEmissionMonitor, ElectrictyMapsClient

provider = ElectrictyMapsClient(location=(42.28, -83.74), estimate=True,
                                emission_factor_type="lifecycle")
now = provider.get_current_carbon_intensity()
monitor = CarbonEmissionMonitor(provider, gpu_indices=[0])
monitor.begin_window("training")
time.sleep(0.5)
measurement = monitor.end_window("training")
print("RESULT " + json.dumps({
    "now": now,
    "time": measurement.time,
    "gpu_energy": measurement.gpu_energy[0],
    "gpu_carbon_emission": measurement.gpu_carbon_emission[0],
}))
