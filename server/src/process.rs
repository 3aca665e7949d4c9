//! How a process running the server is set up before anything else runs: the server binary
//! (`main.rs`) and the benchmark, which runs the engine in its own process and must measure it
//! as the server runs.

/// No transparent huge pages for this process. mimalloc asks for them on its arenas, so the
/// first touch of fresh heap zeroed 2 MiB at a time: a stream's first read after a restart
/// (about 1 MB of buffers) took 7–42 ms instead of 7 (`scripts/bench.sh --peers`, "the first of
/// those reads"), and a 64-message append's p99 was 38–49 ms against 27–29 without them, at the
/// same throughput. The kernel flag covers every mapping, mimalloc's madvise included.
pub fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
