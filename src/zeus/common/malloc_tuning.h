// glibc's default malloc thresholds suit short-lived allocations, not a training loop that
// allocates and frees the same multi-MB activation and gradient buffers every step: past the
// (dynamic, at most 32 MiB) mmap threshold each such buffer is a fresh mmap, and the heap is
// trimmed back to the kernel after every step, so each step re-faults its pages. Which of these
// happens depends on the sizes of the first mmapped chunks freed (the dynamic thresholds follow
// them), so one program lands in a fast or a slow mode from run to run. Fixing both thresholds
// once at start-up keeps the pages: bench/ddp_vs_pytorch measured 3 minor faults per step in 5
// of 5 runs with it, and 3 to 6413 (and 0.78x to 1.05x the speed) without (bench/README.md).
#pragma once

namespace zeus {

// Setting either threshold turns off glibc's dynamic mmap threshold, so both are set together:
// the trim threshold only once the mmap threshold was accepted.
struct MallocTuning {
  long mmap_threshold_bytes = 64L << 20;
  long trim_threshold_bytes = 256L << 20;
};

// Applies `tuning` with mallopt(). Returns false, changing nothing, when the user set
// GLIBC_TUNABLES (their choice wins) or the C library is not glibc. Idempotent; call before the
// first large allocation.
bool tune_malloc_for_training(const MallocTuning& tuning = {});

}  // namespace zeus
