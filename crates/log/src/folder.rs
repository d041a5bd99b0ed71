//! Many logs (a folder's): each folded alone, ranks closed, on the worker that scanned it, and
//! merged into the report in input order ([`ReportBuilder::merge`]), so the calling thread
//! does little more than add up. The merge is exact for files that do not go on with one
//! another's ranks (one log per rank, per node, per launch); for any other it stops with
//! [`Stop::Overlap`], and the caller folds the files one after the other instead.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::ReportError;
use crate::fold::ReportBuilder;
use crate::scan::inputs::{self, NulSkipped};
use crate::scan::{Item, Mode, OOM_BIT, ScanCounts, Sink, lines, many};
use crate::schema::SkippedInput;
use crate::{crash, walk, whatif};
use memprints_estimate::LoggedConfig;
use std::cell::Cell;
use std::io::Read as _;
use std::sync::Arc;

/// Why [`fold_files`] stopped.
#[derive(Debug)]
pub enum Stop {
    /// A file goes on with a rank of the run before it: fold the files one by one.
    Overlap,
    /// A file could not be read.
    Error(ReportError),
}

/// What [`fold_files`] gathers besides the fold.
#[derive(Default)]
pub struct Gathered {
    /// The inputs read, by index.
    pub read: Vec<String>,
    /// The binary files left out.
    pub skipped: Vec<SkippedInput>,
    /// The notes of the files read around NUL bytes.
    pub notes: Vec<crate::scan::inputs::InputNote>,
    /// Each file's config lines ([`whatif::config_lines`]), by input read.
    pub configs: Vec<Vec<LoggedConfig>>,
}

impl Gathered {
    /// `file` read, with the NUL bytes its reading left out and its config lines.
    fn add(&mut self, file: &Path, nuls: &NulSkipped, configs: Vec<LoggedConfig>) {
        let name = file.display().to_string();
        self.notes.extend(nuls.note(&name));
        self.read.push(name);
        self.configs.push(configs);
    }
}

/// One file folded alone.
struct FileFold {
    builder: ReportBuilder,
    counts: ScanCounts,
    nuls: NulSkipped,
    configs: Vec<LoggedConfig>,
}

/// Folds one text file alone (`None` for a binary one) and closes its ranks; reads its config
/// lines too when it may hold some ([`configs_if_any`]).
fn fold_one(path: &Path, only: &Option<BTreeSet<u32>>) -> io::Result<Option<FileFold>> {
    let (mut steps, mut oom) = (false, false);
    let mut sink = |builder: &mut ReportBuilder, item: Item<'_>| {
        match item {
            Item::Steps(_) => steps = true,
            Item::Line(_, found) => oom |= found & OOM_BIT != 0,
            _ => {}
        }
        builder.item(item);
    };
    // Each way of reading gives the builder, with what it read, and the text it scanned in
    // place (if it did).
    let (mut builder, launches, counts, nuls, exception, text) =
        if let Some(text) = plain_text(path)? {
            // Scanned in place; its detail prints are read again from it when its ranks close,
            // not copied.
            let text = Arc::new(text);
            let bytes = &text[..];
            let launches = inputs::launches(bytes);
            let mut builder = ReportBuilder::for_one_file(only.clone(), launches);
            builder.backing(text.clone());
            let counts = lines::scan_bytes(bytes, Mode::FoldSteps, |item| sink(&mut builder, item));
            let tail = &bytes[bytes.len().saturating_sub(crash::TAIL_BYTES)..];
            let exception = crash::last_exception(tail);
            let nuls = NulSkipped::default();
            (builder, launches, counts, nuls, exception, Some(text))
        } else {
            let Some((reader, launches, nuls)) = inputs::open_text_head(path)? else {
                return Ok(None);
            };
            let mut builder = ReportBuilder::for_one_file(only.clone(), launches);
            let mut reader = crash::TailKeeper::new(reader);
            let counts = lines::scan_serial(&mut reader, Mode::FoldSteps, |item| {
                sink(&mut builder, item)
            })?;
            let exception = crash::last_exception(reader.tail());
            (builder, launches, counts, nuls.get(), exception, None)
        };
    let ended_badly = exception.is_some();
    builder.end_source_with(exception);
    // Closing lets go of the builder's hold on the text: its buffer serves the next file.
    builder.close_ranks();
    if let Some(text) = text {
        SPARE.set(Arc::try_unwrap(text).ok());
    }
    let configs = configs_if_any(path, launches, steps, oom, ended_badly);
    Ok(Some(FileFold {
        builder,
        counts,
        nuls,
        configs,
    }))
}

/// The biggest file [`plain_text`] reads whole: at most this much per worker is held at once.
const WHOLE_MAX: u64 = 16 << 20;

thread_local! {
    /// The buffer of the thread's last file read whole ([`plain_text`]): a worker that reads
    /// file after file faults its pages in once. (Mapping each file instead costs more: every
    /// map and unmap takes the process's map lock, which the other workers' faults wait on.)
    static SPARE: Cell<Option<Vec<u8>>> = const { Cell::new(None) };
}

/// `path` read whole, when it is a plain log (neither gzip nor zstd, not empty, at most
/// [`WHOLE_MAX`] bytes) without a NUL byte: one that [`inputs::open_text_head`] would read as it
/// is, as text (binary data holds NUL bytes), with nothing left out. `None` for any other
/// file, which is read as a stream. A file that grows while it is read is read to the size it
/// had when opened.
fn plain_text(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() == 0 || meta.len() > WHOLE_MAX {
        return Ok(None);
    }
    let mut text = SPARE.take().unwrap_or_default();
    text.clear();
    text.reserve(meta.len() as usize);
    // `take`: a file that grew since is read to the size it had, in one read call or a few.
    (&mut file).take(meta.len()).read_to_end(&mut text)?;
    if text.is_empty() || inputs::is_compressed(&text) || memchr::memchr(0, &text).is_some() {
        SPARE.set(Some(text));
        return Ok(None);
    }
    Ok(Some(text))
}

/// Folds `files` into `builder` (see the module doc), gathering what else the report needs.
pub fn fold_files(
    files: &[PathBuf],
    only: &Option<BTreeSet<u32>>,
    builder: &mut ReportBuilder,
    gathered: &mut Gathered,
) -> Result<(), Stop> {
    let fold = |index: usize, outcome: io::Result<Option<FileFold>>| -> Result<(), Stop> {
        let file = &files[index];
        let Some(folded) = outcome.map_err(|source| Stop::Error(read_error(file, source)))? else {
            gathered.skipped.push(walk::skipped_binary(file));
            return Ok(());
        };
        builder
            .merge(folded.builder, gathered.read.len())
            .map_err(|_| Stop::Overlap)?;
        builder.count_scan(folded.counts);
        gathered.add(file, &folded.nuls, folded.configs);
        Ok(())
    };
    // Batches of files, so that there are still a few dozen per worker: the work spreads evenly
    // and each file's hand-over costs a sixteenth of a wake-up at most.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let batch = (files.len() / (workers * 32)).clamp(1, 16);
    many::each_file(files, batch, |path| fold_one(path, only), fold)
}

/// Folds `files` into `builder` one after the other, as they are scanned on all cores (each
/// file's items kept by its worker, [`many::Collected`], and fed in input order): the fold of
/// files that go on with one another's ranks.
pub fn fold_in_order(
    files: &[PathBuf],
    builder: &mut ReportBuilder,
    gathered: &mut Gathered,
) -> Result<(), ReportError> {
    let fold = |index: usize, outcome: many::Scanned<_>| -> Result<(), ReportError> {
        let file = &files[index];
        let Some((collected, configs)) = outcome.map_err(|source| read_error(file, source))? else {
            gathered.skipped.push(walk::skipped_binary(file));
            return Ok(());
        };
        builder.begin_source_launching(gathered.read.len(), collected.launches);
        collected.replay(|item| builder.item(item));
        builder.end_source_with(collected.exception);
        builder.count_scan(collected.counts);
        gathered.add(file, &collected.nuls, configs);
        Ok(())
    };
    let configs_of = |path: &Path, kept: &many::Collected| {
        configs_if_any(
            path,
            kept.launches,
            kept.holds_steps(),
            kept.holds_oom(),
            kept.exception.is_some(),
        )
    };
    many::scan_files(files, configs_of, fold)
}

/// The config lines of a log that may hold some ([`whatif::config_lines`]): PithTrain's logger
/// writes them on rank 0 only, where its launch and step lines go, so the other ranks' logs are
/// not read a second time for them. A log that ended in an exception or an OOM is, steps or
/// not: a run that died in its first step logged its config (perhaps past the first 64 KiB)
/// and no step line.
fn configs_if_any(
    path: &Path,
    launches: bool,
    steps: bool,
    oom: bool,
    exception: bool,
) -> Vec<LoggedConfig> {
    if launches || steps || oom || exception {
        whatif::config_lines(path)
    } else {
        Vec::new()
    }
}

fn read_error(file: &Path, source: io::Error) -> ReportError {
    ReportError::Read {
        path: file.to_path_buf(),
        source,
    }
}
