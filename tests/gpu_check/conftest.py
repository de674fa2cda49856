"""The GPU check's tests: unit tests of its runner, return rules and isolation (fast), and the
check itself run in --cpu-only mode (tests/gpu_check/test_cpu_check.py, minutes)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
