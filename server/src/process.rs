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

/// The async runtime's worker threads for a server on `cores` cores whose log is at
/// `database_url` (`None`: the default, SQLite). On SQLite one core is left to the append thread
/// (`store/sqlite/appender.rs`), which runs every commit and is busy whenever appends are: with a
/// worker per core, the workers and that thread took turns on the cores, and each request woke
/// the other worker for nothing. On 2 cores, one worker instead of two (`wrk`, 64 connections,
/// 5 s, 3 runs a side): single appends 40.0–40.8 → 41.5–42.4 thousand/s at 27.2–27.5 → 25.1–25.3
/// µs of CPU each, 64 per POST 0.90–1.00 → 1.01–1.13 million messages/s at 1.14–1.35 → 0.98–1.16
/// µs; the engine bench 1.29–1.41 → 1.46–1.51 million events/s. PostgreSQL commits on the
/// runtime itself (there one worker was 10 % slower at 64 per POST): a worker per core.
/// `TOKIO_WORKER_THREADS`, when set, wins (tokio reads it).
pub fn runtime_workers(cores: usize, database_url: Option<&str>) -> usize {
    let sqlite = database_url.is_none_or(crate::store::is_sqlite);
    if sqlite {
        cores.saturating_sub(1).max(1)
    } else {
        cores.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::runtime_workers;

    #[test]
    fn sqlite_leaves_a_core_to_its_append_thread_and_postgres_does_not() {
        let cases = [
            (1, None, 1),
            (2, None, 1),
            (8, None, 7),
            (2, Some("sqlite://data/agentstream.db"), 1),
            (16, Some("sqlite::memory:"), 15),
            (2, Some("postgres://u@h/db"), 2),
            (2, Some("postgresql://u@h/db"), 2),
            (0, Some("postgres://u@h/db"), 1),
            (0, None, 1),
        ];
        for (cores, url, workers) in cases {
            assert_eq!(runtime_workers(cores, url), workers, "{cores} cores, {url:?}");
        }
    }
}
