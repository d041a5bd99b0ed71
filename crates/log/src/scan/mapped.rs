//! A read-only memory map of a log file: its bytes without copying them out of the page cache.
//!
//! Contract: [`Mapped::new`] maps a whole regular file (`MAP_PRIVATE`, read-only, read-ahead
//! asked for sequential use) through `memmap2` and [`Mapped::bytes`] is the file as it was when
//! mapped; the map goes with the value. [`Mapped::release`] and [`Mapped::populate`] are
//! `madvise` over whole pages (`MADV_DONTNEED`, `MADV_POPULATE_READ`).
//!
//! A file that shrinks while it is mapped turns the next access past its new end into SIGBUS.
//! Before the first map a handler is installed for it that writes one line naming the file
//! being read (`memprints: cannot read PATH: the file shrank while it was being read`) and ends
//! the process with exit status 1: the report stops, as on any read error, instead of dying
//! with a bus error. Any other SIGBUS ends the process the same way.

use std::fs::File;
use std::io;
use std::sync::Once;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use memmap2::{Advice, Mmap, UncheckedAdvice};

/// A file's bytes, mapped read-only.
pub struct Mapped {
    map: Mmap,
}

/// The line the SIGBUS handler writes: set before each map, read by the handler.
static MESSAGE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static MESSAGE_LEN: AtomicUsize = AtomicUsize::new(0);

impl Mapped {
    /// Maps `file`, whose path `name` goes into the message of a bus error.
    pub fn new(file: &File, name: &str) -> io::Result<Mapped> {
        install_sigbus_handler();
        let message: &'static [u8] = Box::leak(
            format!("memprints: cannot read {name}: the file shrank while it was being read\n")
                .into_bytes()
                .into_boxed_slice(),
        );
        MESSAGE_LEN.store(0, Ordering::SeqCst);
        MESSAGE.store(message.as_ptr().cast_mut(), Ordering::SeqCst);
        MESSAGE_LEN.store(message.len(), Ordering::SeqCst);
        // SAFETY: a read-only private map of an open file. Another process may still shrink
        // the file: the next access past its new end is a SIGBUS, which the handler installed
        // above turns into one line and exit status 1 (see the module doc); nothing reads
        // garbage.
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        if !map.is_empty() {
            // The advice is only a hint.
            let _ = map.advise(Advice::Sequential);
        }
        Ok(Mapped { map })
    }

    /// Lets the kernel drop the pages of `range` from this process (they stay in the page
    /// cache): what has been read no longer counts in its resident memory. A later access reads
    /// them in again, so this never changes [`Self::bytes`]; it only keeps the resident size of
    /// a scan from growing with the file. Only the whole pages inside `range` are released.
    pub fn release(&self, range: std::ops::Range<usize>) {
        // Whole pages only: the start rounded up, the end down (the file's end counts whole).
        let page = page_size();
        let len = self.map.len();
        let start = range.start.div_ceil(page) * page;
        let end = if range.end >= len {
            len
        } else {
            range.end / page * page
        };
        if start >= end {
            return;
        }
        // SAFETY: the map is private and never written, so its pages come back from the file
        // unchanged if touched again: dropping them changes no byte that `bytes` shows. The
        // result is ignored: the advice only changes what stays resident.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(UncheckedAdvice::DontNeed, start, end - start)
        };
    }

    /// Asks the kernel to map the pages of `range` now, in one call, rather than one fault at a
    /// time as the scan touches them (`MADV_POPULATE_READ`, Linux 5.14; on an older kernel, or
    /// when it fails, the pages simply fault in as before). Never changes [`Self::bytes`].
    pub fn populate(&self, range: std::ops::Range<usize>) {
        let end = range.end.min(self.map.len());
        if range.start >= end {
            return;
        }
        // A failure (an old kernel, a file that shrank) is an error return, never a signal.
        let _ = self
            .map
            .advise_range(Advice::PopulateRead, range.start, end - range.start);
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

/// The system's page size (4096 when it cannot say).
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .unwrap_or(4096)
        .max(1)
}

fn install_sigbus_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the handler calls only async-signal-safe functions (write, _exit) and reads
        // two atomics; sigaction is given a zeroed, then filled, struct.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    });
}

extern "C" fn on_sigbus(_signal: libc::c_int) {
    let ptr = MESSAGE.load(Ordering::SeqCst);
    let len = MESSAGE_LEN.load(Ordering::SeqCst);
    const FALLBACK: &[u8] = b"memprints: bus error while reading a file\n";
    let (ptr, len) = if ptr.is_null() || len == 0 {
        (FALLBACK.as_ptr(), FALLBACK.len())
    } else {
        (ptr.cast_const(), len)
    };
    // SAFETY: write and _exit are async-signal-safe; the message is a leaked, never-freed
    // buffer of `len` bytes.
    unsafe {
        libc::write(2, ptr.cast(), len);
        libc::_exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_mapped_file_reads_as_its_bytes() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"[rank=0] a\nnoise\n").unwrap();
        let map = Mapped::new(&file, "t.log").unwrap();
        assert_eq!(map.bytes(), b"[rank=0] a\nnoise\n");
        map.release(0..4096);
        assert_eq!(
            map.bytes(),
            b"[rank=0] a\nnoise\n",
            "released pages read back"
        );
        let empty = tempfile::tempfile().unwrap();
        assert!(Mapped::new(&empty, "e.log").unwrap().bytes().is_empty());
    }
}
