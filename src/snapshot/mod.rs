//! `memprints snapshot`: reads `torch.cuda.memory._snapshot()` pickles without running Python
//! and reports what held memory at the peak.
//!
//! The flow: [`pickle`] reads bytes into values without executing anything → [`decode`] turns
//! them into compact segments, trace entries and interned frames → [`analyze`] finds the peak,
//! the stacks live there and the OOMs → [`diff`] compares two snapshots → [`render`] writes text,
//! JSON (`schema/snapshot.schema.json`) or HTML with an SVG timeline. [`load`] reads and
//! analyses one file; [`cli`] holds the clap arguments and `execute`.

pub mod analyze;
// A doc comment on a clap item is `--help` text: documenting the rest of `cli` changes the
// help, which is for the CLI layer to decide.
#[allow(missing_docs)]
pub mod cli;
pub mod decode;
pub mod diff;
// Kept as it is in this change (the reader is being sped up next); its own docs come with it.
#[allow(missing_docs)]
pub mod pickle;
pub mod render;

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};

use analyze::DeviceReport;
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
}

impl SnapshotReport {
    /// The device with the highest peak, whose figures stand for the whole snapshot.
    pub fn primary(&self) -> &DeviceReport {
        &self.devices[0]
    }
}

/// A file that could not be read, reported next to those that could.
#[derive(Debug, Clone, serde::Serialize)]
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
}

/// Reads and analyses one snapshot file, with a progress bar on large files when `progress`.
pub fn load(path: &Path, progress: bool) -> Result<SnapshotReport, LoadError> {
    let display = path.display().to_string();
    let file = File::open(path).map_err(|source| LoadError::Open {
        path: display.clone(),
        source,
    })?;
    let file_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let bar = (progress && file_bytes >= PROGRESS_MIN_BYTES && std::io::stderr().is_terminal())
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
        inner: BufReader::with_capacity(1 << 20, file),
        bar: bar.clone(),
    };
    let input = crate::compressed::decompressed(input).map_err(|source| LoadError::Open {
        path: display.clone(),
        source,
    })?;
    let snapshot = Snapshot::read(input);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let snapshot = snapshot.map_err(|source| LoadError::Read {
        path: display.clone(),
        source,
    })?;
    let devices = analyze::analyze(&snapshot);
    if devices.is_empty() {
        return Err(LoadError::Empty { path: display });
    }
    Ok(SnapshotReport {
        rank: rank_of(path),
        path: display,
        file_bytes,
        events: snapshot.device_traces.iter().map(Vec::len).sum(),
        devices,
        allocator_settings: snapshot.allocator_settings,
    })
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

/// Expands directories into their `*.pickle` / `*.pkl` files, also gzip'd or zstd'd (not
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
