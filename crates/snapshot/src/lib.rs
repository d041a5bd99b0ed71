//! # memprints-snapshot
//!
//! Reads `torch.cuda.memory._snapshot()` pickles without running Python and finds what held
//! memory at the peak.
//!
//! The flow: [`pickle`] reads bytes into values without executing anything → [`decode`] turns
//! them into compact segments, trace entries and interned frames → [`analyze`] finds the peak,
//! what was allocated, active and reserved there, the stacks live there and the OOMs →
//! [`timeline`] packs a device's trace for the interactive chart, its memory coloured by
//! [`owner`] (the library or model file that allocated it) → [`diff`] compares two snapshots. Saying it (text, JSON, HTML) is `memprints-present`'s job; [`compressed`] opens
//! gzip, zstd and xz inputs, for the log reader too.
//!
//! # Entry point for other commands
//! [`load`] reads and analyses one file (plain, gzip, zstd or xz) and returns a
//! [`SnapshotReport`]; its [`SnapshotReport::primary`] device carries `peak_allocated_bytes`,
//! `peak_reserved_bytes`, `peak_active_bytes`, `peak_time_us` and `peak_stacks` (largest
//! first). This signature and those fields are kept stable for `report`. [`load_all`] reads
//! many files on all cores, as many at once as the memory budget holds ([`budget`]).

pub mod analyze;
pub mod budget;
pub mod compressed;
pub mod decode;
pub mod diff;
pub mod frames;
pub mod owner;
pub mod pickle;
pub mod timeline;

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};

use analyze::DeviceReport;
use budget::{BASE_CHARGE, Meter, Pool};
use decode::{Snapshot, SnapshotError};

/// Files at least this large get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 100 * 1024 * 1024;

/// One analysed snapshot file.
#[derive(Debug, Clone)]
pub struct SnapshotReport {
    /// The file, as given.
    pub path: String,
    /// From `rank(\d+)` in the file name.
    pub rank: Option<u32>,
    /// The file's size on disk (compressed, when it is).
    pub file_bytes: u64,
    /// Trace entries over all devices.
    pub events: usize,
    /// Primary device first (see [`analyze::analyze`]); never empty.
    pub devices: Vec<DeviceReport>,
    /// The caching allocator's settings as `(key, repr of the value)`.
    pub allocator_settings: Vec<(String, String)>,
    /// One per device, in `devices` order, when [`LoadOptions::timeline`] asked for them.
    pub timelines: Vec<timeline::DeviceTimeline>,
}

impl SnapshotReport {
    /// The device with the highest peak, whose figures stand for the whole snapshot.
    pub fn primary(&self) -> &DeviceReport {
        &self.devices[0]
    }
}

/// A file that could not be read, reported next to those that could.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct FailedInput {
    /// The file, as given.
    pub path: String,
    /// Why, in one line.
    pub error: String,
}

/// Why a snapshot file could not be reported on; one line.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened or its compression not be read.
    #[error("{path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is compressed in a format memprints does not read.
    #[error(
        "{path}: compressed with {format}, which memprints does not read: decompress it first ({hint})"
    )]
    Compression {
        /// The file.
        path: String,
        /// The format its first bytes name.
        format: &'static str,
        /// The command that decompresses it.
        hint: &'static str,
    },
    /// The file is not a readable memory snapshot.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// What is wrong with it.
        source: SnapshotError,
    },
    /// The snapshot has nothing to report on.
    #[error("{path}: the snapshot holds no segments and no trace events")]
    Empty {
        /// The file.
        path: String,
    },
    /// Reading the file would pass the memory budget.
    #[error(
        "{path}: reading it needs more than {} (--max-memory): {at}",
        budget::format_size(*budget)
    )]
    OverBudget {
        /// The file.
        path: String,
        /// The limit it was read against.
        budget: u64,
        /// Where reading stopped.
        at: String,
    },
}

/// What [`load_with`] builds besides the analysis, and within how much memory.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    /// A progress bar on large files, when stderr is a terminal.
    pub progress: bool,
    /// The packed trace of each device for the interactive timeline.
    pub timeline: bool,
    /// The memory budget in bytes: for one file in [`load_with`], for all of them together in
    /// [`load_all`].
    pub max_memory: u64,
    /// Keep only this many of each device's largest stack groups (what the renderers show),
    /// so that reports of many files stay small; all when `None`.
    pub keep_stacks: Option<usize>,
    /// Also hold each file to [`budget::size_cap`] of its size (on when the budget is the
    /// default; a `--max-memory` the user gave is taken as it is).
    pub size_cap: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            progress: false,
            timeline: false,
            max_memory: budget::DEFAULT_MAX_MEMORY,
            keep_stacks: None,
            size_cap: true,
        }
    }
}

/// What the analysis allocates per trace event (its intervals and live blocks) and what the
/// timeline adds, charged before either runs.
const ANALYSIS_BYTES_PER_EVENT: u64 = 16;
const TIMELINE_BYTES_PER_EVENT: u64 = 40;

/// Reads and analyses one snapshot file, with a progress bar on large files when `progress`.
pub fn load(path: &Path, progress: bool) -> Result<SnapshotReport, LoadError> {
    load_with(
        path,
        LoadOptions {
            progress,
            ..LoadOptions::default()
        },
    )
}

/// Reads and analyses every file of `paths`, results in the same order, within
/// `options.max_memory` in all.
///
/// Workers (one per rayon thread) take the files in order; each waits until the shared
/// [`Pool`] holds the file's [`budget::reservation`], reads it against that, and gives it
/// back. A file that needs more than its reservation is read again at the end, alone, against
/// the whole budget, where needing more is an error.
pub fn load_all(paths: &[PathBuf], options: LoadOptions) -> Vec<Result<SnapshotReport, LoadError>> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    // Progress bars of files read side by side would overwrite each other.
    let options = LoadOptions {
        progress: options.progress && paths.len() == 1,
        ..options
    };
    let pool = Pool::new(options.max_memory);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<SnapshotReport, LoadError>>>> =
        Mutex::new((0..paths.len()).map(|_| None).collect());
    let retry = Mutex::new(Vec::new());
    let workers = rayon::current_num_threads().clamp(1, paths.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = paths.get(i) else { break };
                    let held = pool.acquire(estimate(path, pool.total()));
                    let result = load_metered(path, options, Meter::new(held));
                    pool.release(held);
                    if matches!(result, Err(LoadError::OverBudget { .. })) && held < pool.total() {
                        retry.lock().unwrap_or_else(|e| e.into_inner()).push(i);
                        continue;
                    }
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(result);
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut retry = retry.into_inner().unwrap_or_else(|e| e.into_inner());
    retry.sort_unstable();
    for i in retry {
        let limit = capped(&paths[i], pool.total(), options);
        results[i] = Some(load_metered(&paths[i], options, Meter::new(limit)));
    }
    results
        .into_iter()
        .map(|r| r.expect("every file was read"))
        .collect()
}

/// `path`'s size on disk and whether its name says it is compressed.
fn size_of(path: &Path) -> (u64, bool) {
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    let compressed = path
        .extension()
        .is_some_and(|e| e == "gz" || e == "zst" || e == "xz");
    (bytes, compressed)
}

/// The reservation of `path` in a pool of `total` bytes, from its size and name.
fn estimate(path: &Path, total: u64) -> u64 {
    let (bytes, compressed) = size_of(path);
    budget::reservation(bytes, compressed, total)
}

/// `limit`, held to `path`'s [`budget::size_cap`] when `options` say so.
fn capped(path: &Path, limit: u64, options: LoadOptions) -> u64 {
    if !options.size_cap {
        return limit;
    }
    let (bytes, compressed) = size_of(path);
    limit.min(budget::size_cap(bytes, compressed))
}

/// [`load`], building what `options` ask for within `options.max_memory` (and the file's
/// [`budget::size_cap`] when `options.size_cap`).
pub fn load_with(path: &Path, options: LoadOptions) -> Result<SnapshotReport, LoadError> {
    let limit = capped(path, options.max_memory, options);
    load_metered(path, options, Meter::new(limit))
}

/// [`load_with`] against `meter`.
fn load_metered(
    path: &Path,
    options: LoadOptions,
    mut meter: Meter,
) -> Result<SnapshotReport, LoadError> {
    let display = path.display().to_string();
    let over = |path: &str, meter: &Meter, at: String| LoadError::OverBudget {
        path: path.to_string(),
        budget: meter.limit(),
        at,
    };
    let file = File::open(path).map_err(|source| LoadError::Open {
        path: display.clone(),
        source,
    })?;
    let file_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let bar =
        (options.progress && file_bytes >= PROGRESS_MIN_BYTES && std::io::stderr().is_terminal())
            .then(|| {
                let bar = indicatif::ProgressBar::new(file_bytes);
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} {eta}",
                    )
                    .expect("static template")
                    .progress_chars("=> "),
                );
                bar.set_message(display.clone());
                bar
            });
    let input = Progress {
        // Small: it only lets the magic bytes be peeked; the reader's own larger reads then
        // bypass it instead of being copied through it.
        inner: BufReader::with_capacity(64 * 1024, file),
        bar: bar.clone(),
    };
    let (input, plain, window) = decompressed(input, &display)?;
    if meter.charge(BASE_CHARGE + window).is_err() {
        return Err(over(
            &display,
            &meter,
            format!(
                "before the first byte (the decompressor alone takes {})",
                budget::format_size(window)
            ),
        ));
    }
    // The size hint lets the reader reserve its records once; compressed sizes say too little.
    let snapshot = Snapshot::read_metered(input, if plain { file_bytes } else { 0 }, &mut meter);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let snapshot = snapshot.map_err(|source| match source {
        SnapshotError::OverBudget { at } => over(&display, &meter, at),
        source => LoadError::Read {
            path: display.clone(),
            source,
        },
    })?;
    let events: u64 = snapshot.device_traces.iter().map(|t| t.len() as u64).sum();
    let per_event = ANALYSIS_BYTES_PER_EVENT
        + if options.timeline {
            TIMELINE_BYTES_PER_EVENT
        } else {
            0
        };
    if meter.charge(events.saturating_mul(per_event)).is_err() {
        return Err(over(
            &display,
            &meter,
            format!("before analysing its {events} trace events"),
        ));
    }
    let mut devices = analyze::analyze(&snapshot);
    if devices.is_empty() {
        return Err(LoadError::Empty { path: display });
    }
    let timelines = if options.timeline {
        devices
            .iter()
            .map(|d| timeline::DeviceTimeline::build(&snapshot, d))
            .collect()
    } else {
        Vec::new()
    };
    if let Some(top) = options.keep_stacks {
        for d in &mut devices {
            d.peak_stacks.truncate(top);
            d.end_stacks.truncate(top);
        }
    }
    Ok(SnapshotReport {
        rank: rank_of(path),
        path: display,
        file_bytes,
        events: snapshot.device_traces.iter().map(Vec::len).sum(),
        devices,
        allocator_settings: snapshot.allocator_settings,
        timelines,
    })
}

/// Compressions recognised by their first bytes that memprints does not read, with the
/// command that undoes each.
const UNREAD_COMPRESSIONS: [(&[u8], &str, &str); 5] = [
    (b"BZh", "bzip2", "bunzip2 FILE"),
    (&[0x04, 0x22, 0x4d, 0x18], "lz4", "lz4 -d FILE"),
    (
        b"PK\x03\x04",
        "zip (a torch.save file or an archive)",
        "unzip FILE",
    ),
    (&[0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c], "7-Zip", "7z x FILE"),
    (&[0x5d, 0x00, 0x00], "legacy lzma", "unlzma FILE"),
];

/// The most memory the xz decoder may use: `xz -9` needs 65 MiB.
const XZ_MEMLIMIT: u64 = 96 << 20;

/// The decompressed bytes of `input` (plain, gzip, zstd or xz), whether it was plain, and the
/// memory its decompressor may take; a compression memprints does not read is named in the
/// error.
fn decompressed<R: BufRead + 'static>(
    mut input: R,
    path: &str,
) -> Result<(Box<dyn Read>, bool, u64), LoadError> {
    let open = |source| LoadError::Open {
        path: path.to_string(),
        source,
    };
    let head = input.fill_buf().map_err(open)?;
    if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        let stream =
            liblzma::stream::Stream::new_stream_decoder(XZ_MEMLIMIT, liblzma::stream::CONCATENATED)
                .map_err(|e| open(e.into()))?;
        return Ok((
            Box::new(liblzma::bufread::XzDecoder::new_stream(input, stream)),
            false,
            XZ_MEMLIMIT,
        ));
    }
    if let Some((_, format, hint)) = UNREAD_COMPRESSIONS
        .iter()
        .find(|(magic, _, _)| head.starts_with(magic))
    {
        return Err(LoadError::Compression {
            path: path.to_string(),
            format,
            hint,
        });
    }
    // Every pickle of protocol 2 or newer starts with PROTO (0x80).
    let plain = head.first() == Some(&0x80);
    let window = crate::compressed::window_bytes(head);
    Ok((
        crate::compressed::decompressed(input).map_err(open)?,
        plain,
        window,
    ))
}

struct Progress<R> {
    inner: R,
    bar: Option<indicatif::ProgressBar>,
}

impl<R: Read> Read for Progress<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(bar) = &self.bar {
            bar.inc(n as u64);
        }
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Progress<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        if let Some(bar) = &self.bar {
            bar.inc(amount as u64);
        }
        self.inner.consume(amount);
    }
}

/// The rank in a file name such as `memory_snapshot_rank3_step0.pickle` (`rank(\d+)`).
pub fn rank_of(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    name.match_indices("rank").find_map(|(i, _)| {
        let digits: String = name[i + 4..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// Expands directories into their `*.pickle` / `*.pkl` files, also gzip'd, zstd'd or xz'd (not
/// recursive), sorted by rank then name; files are kept as given.
pub fn expand_inputs(inputs: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        if !input.is_dir() {
            out.push(input.clone());
            continue;
        }
        let mut found = Vec::new();
        for entry in std::fs::read_dir(input)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let bare = name
                .strip_suffix(".gz")
                .or_else(|| name.strip_suffix(".zst"))
                .or_else(|| name.strip_suffix(".xz"))
                .unwrap_or(name);
            let is_pickle = bare.ends_with(".pickle") || bare.ends_with(".pkl");
            if is_pickle && path.is_file() {
                found.push(path);
            }
        }
        found.sort_by(|a, b| rank_of(a).cmp(&rank_of(b)).then_with(|| a.cmp(b)));
        out.extend(found);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_comes_from_the_file_name() {
        assert_eq!(
            rank_of(Path::new("/tmp/memory_snapshot_rank12_step0.pickle")),
            Some(12)
        );
        assert_eq!(rank_of(Path::new("/rank3/snap.pickle")), None);
        assert_eq!(rank_of(Path::new("ranking_rank7.pickle")), Some(7));
        assert_eq!(rank_of(Path::new("snap.pickle")), None);
    }
}
