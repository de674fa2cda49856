"""The GPU check (scripts/gpu-check.sh): one prepared call on the GPU machine, also runnable on a
CPU machine with --cpu-only. Standard library only, Python >= 3.9."""
