//! The crash-test hook. With `MEMPRINTS_CRASH_AT=<n>` in the environment the process kills
//! itself with SIGKILL just before the n-th step that changes or syncs a file (counted from 1
//! across the whole command: lock, recovery, journal, temp files, renames, fsyncs), the way
//! `kill -9` would stop it there; the tests then check what the next command makes of the tree.
//!
//! It is compiled in always and inert unless the variable is set, so the crash tests run the very
//! binary users run: a cargo feature would build a different one, and `cargo test` cannot turn a
//! feature on for the binary its integration tests start. Unset, a step costs one atomic load.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The environment variable that arms the hook.
pub const CRASH_AT: &str = "MEMPRINTS_CRASH_AT";

/// Marks one step; kills the process here when it is the step `MEMPRINTS_CRASH_AT` names.
pub(crate) fn point(step: &str) {
    static AT: OnceLock<Option<u32>> = OnceLock::new();
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let Some(at) = *AT.get_or_init(|| std::env::var(CRASH_AT).ok()?.parse().ok()) else {
        return;
    };
    if COUNT.fetch_add(1, Ordering::SeqCst) + 1 == at {
        eprintln!("memprints: {CRASH_AT}={at}: killed before {step}");
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        std::process::abort();
    }
}
