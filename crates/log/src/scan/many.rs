//! Reading many log files at once: each file is scanned on a thread of its own, all cores busy,
//! and what it holds is folded into the report in input order, so the report is the one a
//! reading of the files one after another gives.
//!
//! Contract: [`scan_files`] opens every file with [`super::inputs::open_text`] and scans it with
//! [`lines::scan_serial`] ([`Mode::FoldSteps`]) on one of `available_parallelism` worker
//! threads, keeping the lines it hands over (and its step aggregates) in a [`Collected`]. The
//! calling thread gets each file's outcome through `fold`, strictly in input order. Memory is
//! bounded: a worker does not start a file more than [`AHEAD`] per worker past the first one
//! not yet folded, so at most that many collections wait at once, whatever the number of files.
//! The first error `fold` returns stops the workers (files being scanned are finished) and is
//! returned. [`each_file`] is the same for any work on a file, a batch of files at a time
//! (what [`crate::folder`] folds each file alone with). The machinery is [`super::ordered`].

use std::io;
use std::path::PathBuf;

use super::inputs;
use super::{Item, Mode, Needles, PreRead, ScanCounts, lines};
use crate::parse::PipelinePoint;
use crate::step_and_oom::StepRun;

/// How many files per worker may be scanned ahead of the one being folded.
pub const AHEAD: usize = 2;

/// What a scan of one file handed over, kept to be folded later.
#[derive(Debug, Default)]
pub struct Collected {
    text: Vec<u8>,
    items: Vec<Kept>,
    /// What the scan counted.
    pub counts: ScanCounts,
    /// Whether the file starts a launch of its own ([`inputs::open_text_head`]).
    pub launches: bool,
    /// The NUL bytes the reading left out.
    pub nuls: inputs::NulSkipped,
    /// The exception of a traceback at the file's end ([`crate::crash::last_exception`]),
    /// read on the worker: most of the fold's work per file otherwise.
    pub exception: Option<crate::crash::Exception>,
}

#[derive(Debug)]
enum Kept {
    Line {
        start: usize,
        end: usize,
        found: Needles,
    },
    Steps(StepRun),
    Detail {
        rank: u32,
        start: usize,
        end: usize,
    },
    Pipeline {
        rank: u32,
        pp: u32,
        point: PipelinePoint,
    },
}

impl Collected {
    fn keep(&mut self, item: Item<'_>) {
        match item {
            Item::Line(line, found) => {
                let start = self.text.len();
                self.text.extend_from_slice(line);
                self.items.push(Kept::Line {
                    start,
                    end: self.text.len(),
                    found,
                });
            }
            Item::Steps(run) => self.items.push(Kept::Steps(*run)),
            Item::Print(PreRead::Detail(rank, print, _)) => {
                let start = self.text.len();
                self.text.extend_from_slice(print);
                self.items.push(Kept::Detail {
                    rank,
                    start,
                    end: self.text.len(),
                });
            }
            Item::Print(PreRead::Pipeline(rank, pp, point)) => {
                self.items.push(Kept::Pipeline { rank, pp, point })
            }
            // Kept print by print: ranks fold independently, so the rank-by-rank order of
            // the group folds as the file's.
            Item::Group(group) => {
                for print in group.prints() {
                    self.keep(Item::Print(print));
                }
            }
        }
    }

    /// Whether the scan found step lines (PithTrain's rank 0 logs them, and its config line
    /// with them).
    pub fn holds_steps(&self) -> bool {
        self.items.iter().any(|item| matches!(item, Kept::Steps(_)))
    }

    /// Whether the scan found a CUDA out-of-memory line (a run that died before its first
    /// step line still has one on rank 0).
    pub fn holds_oom(&self) -> bool {
        self.items
            .iter()
            .any(|item| matches!(item, Kept::Line { found, .. } if found & super::OOM_BIT != 0))
    }

    /// Hands the items to `sink` as the scan did.
    pub fn replay(&self, mut sink: impl FnMut(Item<'_>)) {
        for item in &self.items {
            match item {
                Kept::Line { start, end, found } => {
                    sink(Item::Line(&self.text[*start..*end], *found))
                }
                Kept::Steps(run) => sink(Item::Steps(run)),
                Kept::Detail { rank, start, end } => sink(Item::Print(PreRead::Detail(
                    *rank,
                    &self.text[*start..*end],
                    None,
                ))),
                Kept::Pipeline { rank, pp, point } => {
                    sink(Item::Print(PreRead::Pipeline(*rank, *pp, *point)))
                }
            }
        }
    }
}

/// The outcome of one file: its text and what `also` found in it, or `None` when it holds
/// binary data.
pub type Scanned<T> = io::Result<Option<(Collected, T)>>;

fn scan_one<T>(
    path: &std::path::Path,
    also: impl Fn(&std::path::Path, &Collected) -> T,
) -> Scanned<T> {
    let Some((reader, launches, nuls)) = inputs::open_text_head(path)? else {
        return Ok(None);
    };
    let mut collected = Collected {
        launches,
        ..Collected::default()
    };
    let mut reader = crate::crash::TailKeeper::new(reader);
    collected.counts =
        lines::scan_serial(&mut reader, Mode::FoldSteps, |item| collected.keep(item))?;
    collected.exception = crate::crash::last_exception(reader.tail());
    collected.nuls = nuls.get();
    let found = also(path, &collected);
    Ok(Some((collected, found)))
}

/// Scans `files` on all cores and calls `fold(index, outcome)` for each, in input order; see
/// the module doc. The worker that scanned a text file also runs `also` on it and what the
/// scan kept of it (a second look at a file in the page cache, on all cores rather than on the
/// folding thread, when what was kept says it is worth one).
pub fn scan_files<T: Send, E>(
    files: &[PathBuf],
    also: impl Fn(&std::path::Path, &Collected) -> T + Sync,
    fold: impl FnMut(usize, Scanned<T>) -> Result<(), E>,
) -> Result<(), E> {
    each_file(files, 1, |path| scan_one(path, &also), fold)
}

/// Runs `work` on each of `files` on all cores and calls `fold(index, result)` for each, in
/// input order, with the stop of [`scan_files`]. A worker takes `batch` files at a time (one
/// hand-over, one wake-up of the calling thread, per batch: for small files these cost about as
/// much as the work), so at most [`AHEAD`] batches per worker wait to be folded.
pub fn each_file<T: Send, E>(
    files: &[PathBuf],
    batch: usize,
    work: impl Fn(&std::path::Path) -> T + Sync,
    mut fold: impl FnMut(usize, T) -> Result<(), E>,
) -> Result<(), E> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let batch = batch.max(1);
    let work = |k: usize| -> Vec<T> {
        let end = ((k + 1) * batch).min(files.len());
        files[k * batch..end].iter().map(|f| work(f)).collect()
    };
    let fold = |k: usize, done: Vec<T>| -> Result<(), E> {
        for (i, result) in done.into_iter().enumerate() {
            fold(k * batch + i, result)?;
        }
        Ok(())
    };
    super::ordered::ordered(files.len().div_ceil(batch), workers, AHEAD, work, fold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_folded_in_input_order_with_their_lines() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = (0..40)
            .map(|i| {
                let path = dir.path().join(format!("{i}.log"));
                // Later files are smaller, so they tend to finish first.
                let noise = "noise\n".repeat((40 - i) * 2000);
                std::fs::write(&path, format!("{noise}[rank={i}] x\n")).unwrap();
                path
            })
            .collect();
        let mut seen = Vec::new();
        scan_files(
            &files,
            |_, _| (),
            |index, outcome| -> Result<(), ()> {
                let (collected, ()) = outcome.unwrap().unwrap();
                collected.replay(|item| {
                    if let Item::Line(line, _) = item {
                        seen.push((index, String::from_utf8_lossy(line).into_owned()));
                    }
                });
                Ok(())
            },
        )
        .unwrap();
        let want: Vec<(usize, String)> = (0..40).map(|i| (i, format!("[rank={i}] x"))).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn batches_of_files_are_folded_in_input_order_and_the_first_error_stops() {
        let files: Vec<PathBuf> = (0..40).map(|i| PathBuf::from(format!("{i}"))).collect();
        let mut seen = Vec::new();
        each_file(
            &files,
            3,
            |path| path.display().to_string(),
            |index, name| -> Result<(), ()> {
                seen.push((index, name));
                Ok(())
            },
        )
        .unwrap();
        let want: Vec<(usize, String)> = (0..40).map(|i| (i, i.to_string())).collect();
        assert_eq!(seen, want);
        let mut folded = 0;
        let err = each_file(
            &files,
            7,
            |_| (),
            |index, ()| {
                folded += 1;
                if index == 9 { Err(index) } else { Ok(()) }
            },
        );
        assert_eq!((err, folded), (Err(9), 10));
    }

    #[test]
    fn the_first_error_of_the_fold_stops_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = (0..200)
            .map(|i| {
                let path = dir.path().join(format!("{i}.log"));
                std::fs::write(&path, "[rank=0] x\n").unwrap();
                path
            })
            .collect();
        let mut folded = 0;
        let err = scan_files(
            &files,
            |_, _| (),
            |index, _| {
                folded += 1;
                if index == 3 { Err(index) } else { Ok(()) }
            },
        );
        assert_eq!((err, folded), (Err(3), 4));
    }

    #[test]
    fn a_missing_file_is_its_outcome_not_a_stop() {
        let dir = tempfile::tempdir().unwrap();
        let files = [dir.path().join("gone.log"), dir.path().join("gone2.log")];
        let mut errors = 0;
        scan_files(
            &files,
            |_, _| (),
            |_, outcome| -> Result<(), ()> {
                errors += usize::from(outcome.is_err());
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(errors, 2);
    }
}
