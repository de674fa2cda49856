"""The grid's signal in Python: Zeus 0.16's carbon and price monitors (ElectricityMaps and
OpenEI answered by a local server that replies what the real APIs reply, and zeus-cpp's trace
files), and CarbonAwarePowerLimitOptimizer on a profile written to disk (fake NVML)."""

from __future__ import annotations

import json
import math
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

import zeus_cpp
from zeus_cpp import _core
from zeus_cpp.monitor._buckets import BucketedWindows
from zeus_cpp.monitor.energy import Measurement
from zeus_cpp.monitor.carbon import (
    CarbonEmissionMonitor,
    CarbonIntensityProvider,
    ElectrictyMapsClient,
    TraceCarbonIntensityProvider,
    ZeusCarbonIntensityHTTPError,
    ZeusCarbonIntensityNotFoundError,
)
from zeus_cpp.monitor.price import (
    EnergyCostMonitor,
    OpenEIClient,
    TraceElectricityPriceProvider,
    ZeusElectricityPriceNotFoundError,
    price_rates,
)

LATEST = {"zone": "US-MIDW-MISO", "carbonIntensity": 466, "datetime": "2024-09-24T03:00:00.000Z",
          "updatedAt": "2024-09-24T02:51:57.260Z", "createdAt": "2024-09-21T03:52:02.373Z",
          "emissionFactorType": "lifecycle", "isEstimated": True,
          "estimationMethod": "TIME_SLICER_AVERAGE"}
HISTORY = {"zone": "US-MIDW-MISO", "history": [
    dict(LATEST, carbonIntensity=400 + h, datetime=f"2024-09-24T{h:02d}:00:00.000Z")
    for h in range(24)]}
NO_DATA = {"error": 'No recent data for zone "US-MIDW-MISO"'}


class FakeApi:
    """A local HTTP server; `routes` maps a path to (status, JSON body or raw bytes)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, object]] = {}
        self.delay_s = 0.0
        self.requests: list[tuple[str, dict, dict]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                api.requests.append((url.path, parse_qs(url.query), dict(self.headers)))
                time.sleep(api.delay_s)
                status, body = api.routes.get(url.path, (404, {"error": "no route"}))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch):
    fake = FakeApi()
    monkeypatch.setenv("ZEUS_ELECTRICITYMAPS_URL", fake.url + "/v3")
    monkeypatch.setenv("ZEUS_OPENEI_URL", fake.url)
    monkeypatch.delenv("ZEUS_ELECTRICITYMAPS_TOKEN", raising=False)
    yield fake
    fake.close()


def test_electricitymaps_asks_what_upstream_asks(api: FakeApi,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    api.routes["/v3/carbon-intensity/latest"] = (200, LATEST)
    api.routes["/v3/carbon-intensity/history"] = (200, HISTORY)
    client = ElectrictyMapsClient((42.28, -83.74))
    assert client.get_current_carbon_intensity() == 466
    path, query, headers = api.requests[-1]
    assert path == "/v3/carbon-intensity/latest"
    assert query == {"lat": ["42.28"], "lon": ["-83.74"], "disableEstimations": ["True"],
                     "emissionFactorType": ["direct"]}
    assert "auth-token" not in {k.lower() for k in headers}
    monkeypatch.setenv("ZEUS_ELECTRICITYMAPS_TOKEN", "s3cret")
    recent = ElectrictyMapsClient((42.28, -83.74), estimate=True,
                                  emission_factor_type="lifecycle").get_recent_carbon_intensity()
    assert len(recent) == 24
    assert recent[datetime(2024, 9, 24, 5, tzinfo=timezone.utc)] == 405
    _, query, headers = api.requests[-1]
    assert query["disableEstimations"] == ["False"]
    assert query["emissionFactorType"] == ["lifecycle"]
    assert {k.lower(): v for k, v in headers.items()}["auth-token"] == "s3cret"
    assert client.update_period == timedelta(hours=1) and client.history_length == 24
    with pytest.raises(ValueError, match="lifestyle"):
        ElectrictyMapsClient((0, 0), emission_factor_type="lifestyle")


def test_electricitymaps_errors_say_what_the_api_said(api: FakeApi) -> None:
    client = ElectrictyMapsClient((42.28, -83.74), timeout_s=0.5)
    api.routes["/v3/carbon-intensity/latest"] = (404, NO_DATA)
    with pytest.raises(ZeusCarbonIntensityHTTPError, match="404.*No recent data for zone"):
        client.get_current_carbon_intensity()
    api.routes["/v3/carbon-intensity/latest"] = (200, {"zone": "X"})
    with pytest.raises(ZeusCarbonIntensityNotFoundError, match="no current carbon intensity"):
        client.get_current_carbon_intensity()
    api.routes["/v3/carbon-intensity/latest"] = (200, b"<html>gateway</html>")
    with pytest.raises(ZeusCarbonIntensityNotFoundError, match="not JSON"):
        client.get_current_carbon_intensity()
    api.routes["/v3/carbon-intensity/latest"] = (200, LATEST)
    api.delay_s = 2.0
    begin = time.monotonic()
    with pytest.raises(ZeusCarbonIntensityHTTPError, match="could not be reached"):
        client.get_current_carbon_intensity()
    assert time.monotonic() - begin < 1.8
    api.delay_s = 0.0


def iso_utc(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def test_electricitymaps_forecast_is_led_by_the_value_now(api: FakeApi,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEUS_ELECTRICITYMAPS_TOKEN", "s3cret")
    hour = math.floor(time.time() / 3600) * 3600
    rows = [(hour, 466.0), (hour + 3600, 200.0), (hour + 7200, 600.0), (hour + 10800, 300.0)]
    api.routes["/v3/carbon-intensity/latest"] = (200, dict(LATEST, datetime=iso_utc(hour)))
    api.routes["/v3/carbon-intensity/forecast"] = (200, {"zone": "US-MIDW-MISO", "forecast": [
        {"carbonIntensity": v, "datetime": iso_utc(t)} for t, v in rows[1:]]})
    client = ElectrictyMapsClient((42.28, -83.74), emission_factor_type="lifecycle")
    assert client.get_current_carbon_intensity() == 466
    t0 = time.time()
    mean = client.get_forecast_mean(7200)
    assert mean == pytest.approx(integral(rows, t0, t0 + 7200) / 7200, rel=1e-3)
    path, query, headers = api.requests[-1]
    assert path == "/v3/carbon-intensity/forecast"
    assert query == {"lat": ["42.28"], "lon": ["-83.74"], "horizonHours": ["6"],
                     "emissionFactorType": ["lifecycle"]}
    assert {k.lower(): v for k, v in headers.items()}["auth-token"] == "s3cret"
    asked = len(api.requests)
    assert client.get_forecast_mean(3600) is not None and len(api.requests) == asked  # reused
    assert client.get_forecast_mean(5 * 3600) is None  # past the forecast's last hour
    # A token without the paid plan: said once, never asked again.
    refused = ElectrictyMapsClient((42.28, -83.74))
    api.routes["/v3/carbon-intensity/forecast"] = (401, {"error": "Not authorized"})
    with pytest.raises(ZeusCarbonIntensityHTTPError, match="401: Not authorized.*not asked again"):
        refused.get_forecast_mean(1800)
    asked = len(api.requests)
    assert refused.get_forecast_mean(1800) is None and len(api.requests) == asked


def write_trace(path: Path, rows: list[tuple[float, float]], column: str = "carbonIntensity"
                ) -> None:
    lines = [f"datetime,{column}"]
    for unix_s, value in rows:
        stamp = datetime.fromtimestamp(unix_s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f"{stamp},{value}")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def test_trace_provider_reads_the_row_of_now_and_rereads_a_changed_file(tmp_path: Path) -> None:
    path = tmp_path / "ci.csv"
    write_trace(path, [(1_700_000_000, 100), (1_700_003_600, 300)])
    now = [1_700_000_100.0]
    provider = TraceCarbonIntensityProvider(path, clock=lambda: now[0])
    assert provider.get_current_carbon_intensity() == 100
    now[0] += 3600
    assert provider.get_current_carbon_intensity() == 300
    assert provider.update_period == timedelta(hours=1)
    recent = provider.get_recent_carbon_intensity()
    assert recent[datetime.fromtimestamp(1_700_003_600, timezone.utc)] == 300
    write_trace(path, [(1_700_000_000, 100), (1_700_003_600, 555)])
    assert provider.get_current_carbon_intensity() == 555
    with pytest.raises(zeus_cpp.ConfigError, match="price_per_kwh"):
        TraceElectricityPriceProvider(path)


def integral(trace: list[tuple[float, float]], t0: float, t1: float) -> float:
    """The trace's value integrated over [t0, t1] (value x s)."""
    total = 0.0
    for i, (start, value) in enumerate(trace):
        end = trace[i + 1][0] if i + 1 < len(trace) else math.inf
        overlap = min(end, t1) - max(start, t0)
        if overlap > 0:
            total += overlap * value
    return total


def test_carbon_monitor_charges_each_period_its_own_intensity(job_env: Path,
                                                              tmp_path: Path) -> None:
    # One-second rows alternating clean and dirty: a 2.5 s window spans three or four of them.
    base = math.floor(time.time())
    rows = [(base + i, 100.0 if i % 2 else 900.0) for i in range(-5, 60)]
    path = tmp_path / "ci.csv"
    write_trace(path, rows)
    monitor = CarbonEmissionMonitor(TraceCarbonIntensityProvider(path), device="sim:v100")
    monitor.begin_window("train", sync_execution=False)
    time.sleep(2.5)
    m = monitor.end_window("train", sync_execution=False)
    t1 = time.time()
    t0 = t1 - m.time
    assert m.warnings == []
    power_w = m.gpu_energy[0] / m.time
    expected = power_w * integral(rows, t0, t1) / 3.6e6
    assert m.gpu_carbon_emission[0] == pytest.approx(expected, rel=0.08)
    # Not the flat charge of any single row's value.
    assert m.gpu_carbon_emission[0] != pytest.approx(m.gpu_energy[0] / 3.6e6 * 100, rel=0.2)
    assert m.gpu_carbon_emission[0] != pytest.approx(m.gpu_energy[0] / 3.6e6 * 900, rel=0.2)
    with pytest.raises(ValueError, match="train"):
        monitor.end_window("train")


class ShortInner:
    """A ZeusMonitor whose per-period (inner) windows see 9 J of their window's 10 J, as they do
    when a loaded machine runs between the outer and inner windows' readings."""

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        pass

    def end_window(self, key: str, sync_execution: bool = True) -> Measurement:
        return Measurement(1.0, {0: 9.0 if key.startswith("__bucket_") else 10.0})


def test_the_window_edges_are_charged_to_its_periods() -> None:
    windows = BucketedWindows(ShortInner(), lambda: 3600.0, lambda: (lambda start: 500.0),
                              "carbon intensity")
    windows.begin("w", sync_execution=True)
    m, amounts, warnings = windows.end("w", sync_execution=True)
    assert m.gpu_energy == {0: 10.0} and warnings == []
    assert amounts == {"gpu_0": pytest.approx(10.0 / 3.6e6 * 500, rel=1e-12)}


class FailingAfterFirst(CarbonIntensityProvider):
    """Answers 300 once, then fails as a dead API does."""

    def __init__(self) -> None:
        self.calls = 0

    def get_current_carbon_intensity(self) -> float:
        self.calls += 1
        if self.calls > 1:
            raise ZeusCarbonIntensityHTTPError("http://127.0.0.1:1/v3 answered 500: boom")
        return 300.0

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        return {}

    @property
    def update_period(self) -> timedelta:
        return timedelta(seconds=1)

    @property
    def history_length(self) -> int:
        return 0


def test_a_failing_provider_never_ends_the_window(job_env: Path, caplog) -> None:
    monitor = CarbonEmissionMonitor(FailingAfterFirst(), device="sim:v100")
    monitor.begin_window("w")
    time.sleep(2.2)
    m = monitor.end_window("w")
    assert m.gpu_carbon_emission[0] == pytest.approx(m.gpu_energy[0] / 3.6e6 * 300, rel=1e-3)
    assert any("used 300" in w and "answered 500" in w for w in m.warnings)
    assert sum("failed" in r.getMessage() for r in caplog.records) == 1  # logged once


class CountingHistory(CarbonIntensityProvider):
    """One-second periods alternating 100 and 900 g/kWh; counts the history requests."""

    def __init__(self) -> None:
        self.history_calls = 0

    def get_current_carbon_intensity(self) -> float:
        return 100.0 if math.floor(time.time()) % 2 else 900.0

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        self.history_calls += 1
        base = math.floor(time.time())
        return {datetime.fromtimestamp(t, timezone.utc): (100.0 if t % 2 else 900.0)
                for t in range(base - 10, base + 1)}

    @property
    def update_period(self) -> timedelta:
        return timedelta(seconds=1)

    @property
    def history_length(self) -> int:
        return 11


def test_a_window_over_many_periods_asks_the_provider_once(job_env: Path, api: FakeApi,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    provider = CountingHistory()
    monitor = CarbonEmissionMonitor(provider, device="sim:v100")
    monitor.begin_window("w", sync_execution=False)
    time.sleep(2.5)  # three or four one-second periods
    m = monitor.end_window("w", sync_execution=False)
    assert provider.history_calls == 1
    assert m.warnings == []
    # The periods were charged their own values, not one flat rate.
    assert m.gpu_carbon_emission[0] != pytest.approx(m.gpu_energy[0] / 3.6e6 * 100, rel=0.2)
    assert m.gpu_carbon_emission[0] != pytest.approx(m.gpu_energy[0] / 3.6e6 * 900, rel=0.2)
    # OpenEI's schedule: one request for the window, whatever its periods.
    api.routes["/utility_rates"] = (200, OPENEI)
    monkeypatch.setenv("ZEUS_OPENEI_API_KEY", "k")
    client = OpenEIClient((42.28, -83.74), "5b0d")
    rates = price_rates(client)
    before = len(api.requests)
    local = datetime.now().astimezone().tzinfo
    assert [rates(datetime(2024, 4, 15, h, tzinfo=local)) for h in (9, 18, 19)] == [0.10, 0.35,
                                                                                     0.35]
    assert len(api.requests) == before + 1


def test_energy_cost_monitor_over_a_price_trace(job_env: Path, tmp_path: Path) -> None:
    base = math.floor(time.time())
    rows = [(base + i, 0.30 if i % 2 else 0.05) for i in range(-5, 60)]
    path = tmp_path / "price.csv"
    write_trace(path, rows, "price_per_kwh")
    monitor = EnergyCostMonitor(TraceElectricityPriceProvider(path), device="sim:v100")
    monitor.begin_window("w", sync_execution=False)
    time.sleep(2.2)
    m = monitor.end_window("w", sync_execution=False)
    t1 = time.time()
    t0 = t1 - m.time
    expected = m.gpu_energy[0] / m.time * integral(rows, t0, t1) / 3.6e6
    assert m.gpu_energy_cost[0] == pytest.approx(expected, rel=0.08)


OPENEI = {"items": [
    {"label": "other", "energyratestructure": [[{"rate": 9.9}]],
     "energyweekdayschedule": [[0] * 24] * 12, "energyweekendschedule": [[0] * 24] * 12},
    {"label": "5b0d", "name": "Time of use",
     "energyratestructure": [[{"rate": 0.10, "unit": "kWh"}], [{"rate": 0.35, "unit": "kWh"}]],
     "energyweekdayschedule": [[0] * 17 + [1] * 4 + [0] * 3] * 12,
     "energyweekendschedule": [[0] * 24] * 12},
]}


def test_openei_rates_by_schedule(api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    api.routes["/utility_rates"] = (200, OPENEI)
    monkeypatch.setenv("ZEUS_OPENEI_API_KEY", "k")
    client = OpenEIClient((42.28, -83.74), "5b0d", sector="Commercial", radius=5)
    rates = client.get_current_electricity_price()
    assert rates["energy_rate_structure"][1][0]["rate"] == 0.35
    _, query, _ = api.requests[-1]
    assert query["sector"] == ["Commercial"] and query["radius"] == ["5"]
    assert query["detail"] == ["full"] and query["api_key"] == ["k"]
    local = datetime.now().astimezone().tzinfo
    monday_6pm = datetime(2024, 4, 15, 18, tzinfo=local)
    assert client.price_at(monday_6pm) == 0.35
    assert client.price_at(monday_6pm.replace(hour=9)) == 0.10
    assert client.price_at(monday_6pm + timedelta(days=5)) == 0.10  # Saturday
    with pytest.raises(ZeusElectricityPriceNotFoundError, match="nope"):
        OpenEIClient((42.28, -83.74), "nope").get_current_electricity_price()


def test_signal_trace_binding_reads_electricitymaps_history(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_text(json.dumps(HISTORY))
    trace = _core.SignalTrace.load(str(path), "carbon")
    assert len(trace.points) == 24
    t = datetime(2024, 9, 24, 5, 30, tzinfo=timezone.utc).timestamp()
    assert trace.at(t)[1] == 405
    assert _core.grid_eta(0.5, 750, 750) == 0.5


# CarbonAwarePowerLimitOptimizer -------------------------------------------------------------

from zeus_cpp.monitor import ZeusMonitor  # noqa: E402
from zeus_cpp.optimizer.power_limit import (  # noqa: E402
    CarbonAwarePowerLimitOptimizer,
    PowerLimitMeasurement,
    ZeusCost,
)
from zeus_cpp.optimizer._selectors import save_profile  # noqa: E402

# 40 profiled steps per limit: W -> (J, s). Zeus at eta 0.8 over 2 GPUs keeps 250 W.
PROFILE = {300: (3000.0, 10.0), 250: (2475.0, 11.0), 200: (2340.0, 13.0), 150: (2380.0, 17.0),
           100: (2750.0, 25.0)}


def formula_limit_w(eta: float, signal: float, signal_max: float, max_power_w: float) -> int:
    """The issue's rule written out: argmin eta E S + (1 - eta) MAXPOWER S_max T, ties high."""
    cost = {w: eta * e * signal + (1 - eta) * max_power_w * signal_max * t
            for w, (e, t) in PROFILE.items()}
    return min(sorted(cost, reverse=True), key=cost.get)


def wait_for(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def hours_around_now(value: float) -> list[tuple[float, float]]:
    hour = math.floor(time.time() / 3600) * 3600
    return [(hour - 3600, value), (hour, value), (hour + 3600, value)]


@pytest.fixture
def nvml(fake_nvml, monkeypatch: pytest.MonkeyPatch):
    """The fake NVML's two A40s at 280 W, opened afresh by this test."""
    from zeus_cpp import device as zdevice

    monkeypatch.setattr(zdevice, "_by_locator", {})
    return fake_nvml


def test_the_rule_is_the_formula_and_zeus_at_the_reference(nvml, tmp_path: Path) -> None:
    profile = tmp_path / "profile.json"
    save_profile(profile, [PowerLimitMeasurement(w, e, t) for w, (e, t) in PROFILE.items()])
    trace = tmp_path / "ci.csv"
    write_trace(trace, hours_around_now(100))
    plo = CarbonAwarePowerLimitOptimizer(ZeusMonitor(), TraceCarbonIntensityProvider(trace),
                                         eta_knob=0.8, profile_path=profile, poll_s=0.02,
                                         max_carbon_intensity="chase")
    try:
        zeus_w = ZeusCost(0.8, world_size=2).select(plo.measurements)
        assert zeus_w == 250 and nvml.limits_w() == [250, 250]
        for s in (10, 100, 300, 600, 749, 750, 751, 1500, 3000, 10_000):
            assert plo.choose(s) // 1000 == formula_limit_w(0.8, s, 750, 600), s
        assert plo.choose(750) // 1000 == zeus_w
        # The profile is Zeus's: a clean grid (100) runs faster, a dirty one slower.
        assert formula_limit_w(0.8, 100, 750, 600) == 300
        assert formula_limit_w(0.8, 3000, 750, 600) == 200
    finally:
        plo.close()


def test_a_change_of_signal_moves_the_limits_within_the_interval(nvml, tmp_path: Path) -> None:
    profile = tmp_path / "profile.json"
    save_profile(profile, [PowerLimitMeasurement(w, e, t) for w, (e, t) in PROFILE.items()])
    trace = tmp_path / "ci.csv"
    write_trace(trace, hours_around_now(100))
    plo = CarbonAwarePowerLimitOptimizer(ZeusMonitor(), TraceCarbonIntensityProvider(trace),
                                         eta_knob=0.8, profile_path=profile, poll_s=0.02,
                                         interval_s=3600, max_carbon_intensity=750)
    wait_for(lambda: plo._poller.latest == 100)
    plo.on_step_begin()
    assert nvml.limits_w() == [300, 300]
    write_trace(trace, hours_around_now(3000))  # the grid got dirty: a move > 10%
    wait_for(lambda: plo._poller.latest == 3000)
    plo.on_step_begin()
    assert nvml.limits_w() == [200, 200]
    write_trace(trace, hours_around_now(3100))  # 3%: not a move, the interval has not passed
    wait_for(lambda: plo._poller.latest == 3100)
    plo.on_step_begin()
    assert [c["signal"] for c in plo.choices] == [100, 3000]
    assert plo.state.optimal_power_limit == 250_000  # Zeus's choice, which the profile keeps
    plo.close()
    assert nvml.limits_w() == [280, 280]  # as they were before the job


def test_the_rule_chooses_for_the_interval_ahead_where_the_trace_reaches_it(
        nvml, tmp_path: Path) -> None:
    profile = tmp_path / "profile.json"
    save_profile(profile, [PowerLimitMeasurement(w, e, t) for w, (e, t) in PROFILE.items()])
    hour = math.floor(time.time() / 3600) * 3600
    trace = tmp_path / "ci.csv"
    # Clean this hour, dirty the next two; the provider's clock 30 min into this hour.
    write_trace(trace, [(hour, 100), (hour + 3600, 3000), (hour + 7200, 3000)])
    provider = TraceCarbonIntensityProvider(trace, clock=lambda: hour + 1800)
    assert provider.get_forecast_mean(3600) == pytest.approx(1550)  # half 100, half 3000
    assert provider.get_forecast_mean(4 * 3600) is None  # past the trace's end
    plo = CarbonAwarePowerLimitOptimizer(ZeusMonitor(), provider, eta_knob=0.8,
                                         profile_path=profile, poll_s=0.02, interval_s=3600,
                                         max_carbon_intensity="chase")
    try:
        wait_for(lambda: plo._poller.latest_forecast is not None)
        plo.on_step_begin()
        [choice] = plo.choices
        assert (choice["now"], choice["signal"]) == (100, pytest.approx(1550))
        expected = formula_limit_w(0.8, 1550, 750, 600)
        assert expected != formula_limit_w(0.8, 100, 750, 600)  # the forecast decides
        assert nvml.limits_w() == [expected, expected]
        assert "forecast" in choice["reason"]
    finally:
        plo.close()


def test_a_dead_provider_never_holds_up_training(nvml, tmp_path: Path, api: FakeApi,
                                                 caplog) -> None:
    profile = tmp_path / "profile.json"
    save_profile(profile, [PowerLimitMeasurement(w, e, t) for w, (e, t) in PROFILE.items()])
    api.routes["/v3/carbon-intensity/latest"] = (200, dict(LATEST, carbonIntensity=100))
    client = ElectrictyMapsClient((42.28, -83.74), timeout_s=0.3)
    plo = CarbonAwarePowerLimitOptimizer(ZeusMonitor(), client, eta_knob=0.8,
                                         profile_path=profile, poll_s=0.02,
                                         max_carbon_intensity="chase")
    wait_for(lambda: plo._poller.latest == 100)
    plo.on_step_begin()
    assert nvml.limits_w() == [300, 300]
    failures = plo._poller.failures
    for status, body, delay in ((500, {"error": "boom"}, 0.0), (200, b"garbage", 0.0),
                                (200, LATEST, 1.0)):
        api.routes["/v3/carbon-intensity/latest"] = (status, body)
        api.delay_s = delay
        wait_for(lambda: plo._poller.failures > failures)
        failures = plo._poller.failures
        begin = time.monotonic()
        for _ in range(50):
            plo.on_step_begin()
        assert time.monotonic() - begin < 0.2  # no step waits for the provider
        assert plo._poller.latest == 100 and nvml.limits_w() == [300, 300]
    api.delay_s = 0.0
    assert sum("reading the carbon intensity failed" in r.getMessage()
               for r in caplog.records) == 1
    plo.close()
    assert nvml.limits_w() == [280, 280]


def test_the_default_reference_is_the_grids_own_day(nvml, tmp_path: Path) -> None:
    """Issue #52: by default the reference is the grid's mean over the last day (the provider's
    get_history_mean): an hour at 300 after a day at 100 is dirty for this grid, so the limit goes
    below Zeus's, where Chase's 750 would run it faster; a flat grid keeps Zeus's choice."""
    profile = tmp_path / "profile.json"
    save_profile(profile, [PowerLimitMeasurement(w, e, t) for w, (e, t) in PROFILE.items()])
    hour = math.floor(time.time() / 3600) * 3600
    trace = tmp_path / "ci.csv"
    write_trace(trace, [(hour - 3600 * h, 100) for h in range(24, 0, -1)] + [(hour, 300)])
    provider = TraceCarbonIntensityProvider(trace, clock=lambda: hour + 60)
    assert provider.get_history_mean(86400) == pytest.approx((100 * (86400 - 60) + 300 * 60)
                                                             / 86400)
    plo = CarbonAwarePowerLimitOptimizer(ZeusMonitor(), provider, eta_knob=0.8,
                                         profile_path=profile, poll_s=0.02)
    try:
        assert plo.signal_max == 0.0  # "grid"
        wait_for(lambda: plo._poller.latest_reference is not None)
        plo.on_step_begin()
        [choice] = plo.choices
        assert choice["reference"] == pytest.approx(100, rel=1e-2)
        zeus_w = ZeusCost(0.8, world_size=2).select(plo.measurements)
        expected = formula_limit_w(0.8, 300, choice["reference"], 600)
        assert expected < zeus_w <= formula_limit_w(0.8, 300, 750, 600)
        assert nvml.limits_w() == [expected, expected]
    finally:
        plo.close()
    write_trace(trace, hours_around_now(300))
    flat = CarbonAwarePowerLimitOptimizer(ZeusMonitor(), TraceCarbonIntensityProvider(trace),
                                          eta_knob=0.8, profile_path=profile, poll_s=0.02)
    try:
        wait_for(lambda: flat._poller.latest_reference is not None)
        flat.on_step_begin()
        assert flat.choices and nvml.limits_w() == [zeus_w, zeus_w]
    finally:
        flat.close()


def test_bad_providers_and_references(nvml, tmp_path: Path) -> None:
    trace = tmp_path / "price.csv"
    write_trace(trace, hours_around_now(0.1), "price_per_kwh")
    with pytest.raises(ValueError, match="max_price='chase'"):
        CarbonAwarePowerLimitOptimizer(ZeusMonitor(), TraceElectricityPriceProvider(trace),
                                       max_price="chase")
    carbon = tmp_path / "ci.csv"
    write_trace(carbon, hours_around_now(100))
    with pytest.raises(ValueError, match="max_carbon_intensity='-3'"):
        CarbonAwarePowerLimitOptimizer(ZeusMonitor(), TraceCarbonIntensityProvider(carbon),
                                       max_carbon_intensity=-3)
    with pytest.raises(TypeError, match="provider"):
        CarbonAwarePowerLimitOptimizer(ZeusMonitor(), object())


def test_upstreams_carbon_script_runs_with_only_its_imports_renamed(job_env: Path, api: FakeApi,
                                                                    tmp_path: Path) -> None:
    import re

    from conftest import explain, python, run

    api.routes["/v3/carbon-intensity/latest"] = (200, LATEST)
    api.routes["/v3/carbon-intensity/history"] = (200, HISTORY)  # 2024's: this hour is not in it
    source = (Path(__file__).parent / "upstream" / "carbon_example.py").read_text()
    renamed, count = re.subn(r"^from zeus\.", "from zeus_cpp.", source, flags=re.M)
    assert count == 1 and "zeus_cpp" not in source
    script = tmp_path / "carbon_example.py"
    script.write_text(renamed)
    proc = run([python(), script])
    assert proc.returncode == 0, explain(proc)
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert r["now"] == 466 and r["gpu_energy"] > 0
    assert r["gpu_carbon_emission"] == pytest.approx(r["gpu_energy"] / 3.6e6 * 466, rel=1e-3)
