"""python -m gpu_check (PYTHONPATH at scripts/): the GPU check; see check.py."""
import sys

from .check import main

sys.exit(main())
