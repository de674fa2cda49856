// glibc's default malloc thresholds suit short-lived allocations, not a training loop that
// allocates and frees the same multi-MB activation and gradient buffers every step: past the
// (dynamic, at most 32 MiB) mmap threshold each such buffer is a fresh mmap, and the heap is
// trimmed back to the kernel after every step, so each step re-faults its pages. Raising both
// thresholds once at start-up keeps the pages. Whether that pays depends on the machine and the
// model: bench/ddp_vs_pytorch measured no gain on the Fashion-MNIST CNN here (bench/README.md).
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
