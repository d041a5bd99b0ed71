//! The file-size limit as an error, not a silent death. By default a write past `ulimit -f`
//! kills the process with SIGXFSZ, in the middle of a commit and without a word; with the signal
//! ignored the write fails with `EFBIG` instead, which the commit rolls back from and reports as
//! [`crate::Error::FileTooLarge`].

/// Ignores SIGXFSZ for the whole process. The binary calls it first thing in `main`.
pub fn ignore_sigxfsz() {
    // SAFETY: installing SIG_IGN runs no handler code, so nothing about it can be unsound; it
    // only changes how the kernel treats the signal. (rustix offers no safe `sigaction`.)
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
