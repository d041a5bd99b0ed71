//! Arguments several commands share: the checkout (`--repo`), the parallel sizes, index lists;
//! and the lock every writing command takes first.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use super::Output;
use memprints_codemod::params;
use memprints_codemod::pithtrain::placement::{self, MAX_SIZE, Parallel};

/// `--repo DIR`.
#[derive(Debug, Clone, Args)]
pub struct RepoArg {
    /// The PithTrain checkout, or its `pithtrain` package folder [default: the current folder
    /// or the nearest parent whose pyproject.toml names the project `pithtrain`].
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
}

impl RepoArg {
    /// Opens the checkout.
    pub fn open(&self) -> memprints_codemod::Result<memprints_codemod::pithtrain::Repo> {
        memprints_codemod::pithtrain::Repo::locate(self.repo.as_deref())
    }
}

/// A parallel size: 1 to [`MAX_SIZE`]. The one range check of `--pp/--ep/--cp/--world`, for
/// `add`, `plan` ([`ParallelArgs`]) and `report --estimate`.
pub fn size() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=i64::from(MAX_SIZE))
}

/// `--pp`, `--ep`, `--cp`, `--world`, `--script`: the sizes a placement is checked for.
#[derive(Debug, Clone, Args)]
pub struct ParallelArgs {
    /// Pipeline-parallel size, to check where detail layers print.
    #[arg(long, value_parser = size())]
    pub pp: Option<u32>,
    /// Expert-parallel size.
    #[arg(long, default_value_t = 1, value_parser = size())]
    pub ep: u32,
    /// Context-parallel size.
    #[arg(long, default_value_t = 1, value_parser = size())]
    pub cp: u32,
    /// World size (number of GPUs) [default: pp * ep * cp].
    #[arg(long, value_parser = size())]
    pub world: Option<u32>,
    /// Read the parallel sizes from a launch script, e.g. examples/pretrain_lm/<variant>/script.py.
    #[arg(long, value_name = "PATH", conflicts_with = "pp")]
    pub script: Option<PathBuf>,
}

/// Refuses `path`, given with `what` (`--config`, `FILE`), when it is not a file, naming both,
/// with `hint` on what to pass instead.
pub fn input_file(what: &str, path: &Path, hint: &str) -> anyhow::Result<()> {
    if path.is_file() {
        return Ok(());
    }
    let why = if path.is_dir() {
        "is a folder, not a file"
    } else if path.exists() {
        "is not a regular file"
    } else {
        "no such file"
    };
    Err(super::exit::hinted(
        format!("{what} {}: {why}", path.display()),
        hint,
    ))
}

/// What the first bytes of a file given as input say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Looks {
    /// A pickle (protocol 2 or later starts with `0x80`): a memory snapshot.
    Pickle,
    /// Text: a log.
    Text,
    /// Compressed, empty, or something else: the reader decides.
    Unknown,
}

/// Looks at the first 4 KiB of `path` (a file given on the command line; a folder or an
/// unreadable file is [`Looks::Unknown`], left to the command to report).
fn looks(path: &Path) -> Looks {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    let Ok(file) = std::fs::File::open(path) else {
        return Looks::Unknown;
    };
    if !path.is_file() || file.take(4096).read_to_end(&mut head).is_err() || head.is_empty() {
        return Looks::Unknown;
    }
    if head[0] == 0x80 {
        return Looks::Pickle;
    }
    // A multi-byte character cut at the 4 KiB mark is still text.
    let valid = match std::str::from_utf8(&head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    let printable = head
        .iter()
        .all(|&b| b >= 0x20 || matches!(b, b'\n' | b'\r' | b'\t' | 0x1b));
    if valid && printable {
        Looks::Text
    } else {
        Looks::Unknown
    }
}

/// True when `path`'s name says it is a memory snapshot: `.pickle` or `.pkl`, compressed or not.
fn named_like_a_snapshot(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase());
    name.is_some_and(|name| {
        let name = [".gz", ".zst", ".xz"]
            .iter()
            .find_map(|ext| name.strip_suffix(ext))
            .unwrap_or(&name);
        name.ends_with(".pickle") || name.ends_with(".pkl")
    })
}

/// `report` refuses inputs that are all memory snapshots, saying what reads them (beside a
/// log, a snapshot is skipped with a note, as the report's reader does).
pub fn refuse_snapshots_as_logs(inputs: &[PathBuf]) -> anyhow::Result<()> {
    let is_snapshot = |path: &PathBuf| {
        path.is_file()
            && (looks(path) == Looks::Pickle
                || named_like_a_snapshot(path) && looks(path) != Looks::Text)
    };
    if inputs.is_empty() || !inputs.iter().all(is_snapshot) {
        return Ok(());
    }
    let shown = inputs[0].display();
    Err(super::exit::hinted(
        format!("LOG {shown}: a memory snapshot (a pickle), not a training log"),
        format!(
            "`memprints snapshot {shown}` summarises it; `memprints report LOG --snapshots {shown}` sets it beside a log's prints"
        ),
    ))
}

/// `snapshot` refuses a log given as a snapshot, saying what reads it.
pub fn refuse_logs_as_snapshots(what: &str, inputs: &[PathBuf]) -> anyhow::Result<()> {
    for path in inputs.iter().filter(|p| p.is_file()) {
        if looks(path) == Looks::Text {
            let shown = path.display();
            return Err(super::exit::hinted(
                format!(
                    "{what} {shown}: a text file (a training log?), not a memory snapshot pickle"
                ),
                format!("`memprints report {shown}` reads the memory prints of a log"),
            ));
        }
    }
    Ok(())
}

/// Warns about printing ranks that a run of `world` GPUs does not have: they print nothing.
pub fn warn_missing_ranks(ranks: &[u32], world: Option<u32>, out: &mut Output) {
    let Some(world) = world else { return };
    let missing: Vec<String> = ranks
        .iter()
        .filter(|&&r| r >= world)
        .map(u32::to_string)
        .collect();
    if missing.is_empty() {
        return;
    }
    let (them, does) = if missing.len() == 1 {
        (format!("rank {}", missing[0]), "does")
    } else {
        (format!("ranks {}", missing.join(", ")), "do")
    };
    out.warning(format_args!(
        "--ranks: {them} {does} not exist in a world of {world} GPUs (ranks 0-{}); it prints nothing",
        world - 1
    ));
}

impl ParallelArgs {
    /// The sizes given (`None` when neither `--pp` nor `--script` is), checked.
    pub fn resolve(&self) -> anyhow::Result<Option<Parallel>> {
        let parallel = if let Some(script) = &self.script {
            input_file(
                "--script",
                script,
                "pass a launch script, e.g. examples/pretrain_lm/<variant>/script.py",
            )?;
            let text =
                std::fs::read_to_string(script).with_context(|| format!("{}", script.display()))?;
            Parallel::from_script(&text, self.world)
        } else if let Some(pp) = self.pp {
            Parallel {
                pp,
                ep: self.ep,
                cp: self.cp,
                world: self
                    .world
                    .unwrap_or(placement::default_world(pp, self.ep, self.cp)),
            }
        } else {
            return Ok(None);
        };
        parallel.dp()?;
        Ok(Some(parallel))
    }
}

/// Parses an optional `--ranks`/`--detail-layers` list.
pub fn index_list(
    text: Option<&str>,
    what: &'static str,
) -> memprints_codemod::Result<Option<Vec<u32>>> {
    text.map(|t| params::parse_index_list(what, t)).transpose()
}

/// Takes the tree's lock for the whole command and rolls back what an interrupted run left,
/// saying so in one note on stderr (stdout stays the command's answer: `--json` is JSON alone).
pub fn lock_and_recover(
    root: &Path,
    command: &str,
    out: &mut Output,
) -> anyhow::Result<memprints_commit::Lock> {
    let lock = memprints_commit::Lock::acquire(root, command)?;
    if let Some(note) = lock.took_over() {
        out.note(note);
    }
    if let Some(recovered) =
        memprints_commit::recover(&lock, &memprints_codemod::pithtrain::TARGET_FOLDERS)?
    {
        out.wrote_files(recovered.restored.len());
        out.note(recovered);
    }
    Ok(lock)
}

/// Refuses an output path that would overwrite one of `inputs` (the same path, a symlink to
/// it, a hard link of it: same device and inode) or land anywhere inside a folder given as
/// input. `inputs` is everything the command reads: logs, snapshots, estimator files. This is
/// the one check every `--out` goes through, before anything is read and again once the
/// command knows every file it read.
pub fn check_out_not_input(out: &Path, inputs: &[PathBuf]) -> memprints_codemod::Result<()> {
    let refuse = |reason: String| memprints_codemod::Error::InvalidArgument {
        what: "--out",
        input: out.display().to_string(),
        reason,
    };
    let resolved = resolve(out);
    let identity = std::fs::metadata(&resolved)
        .ok()
        .map(|m| (m.dev(), m.ino()));
    for input in inputs {
        let (Ok(meta), Ok(canonical)) = (std::fs::metadata(input), std::fs::canonicalize(input))
        else {
            // A missing input is the command's own error to report.
            continue;
        };
        let shown = input.display();
        if meta.is_dir() {
            if resolved == canonical {
                return Err(refuse(format!("it is {shown}, a folder given as input")));
            }
            if resolved.starts_with(&canonical) {
                return Err(refuse(format!(
                    "it is inside {shown}, a folder given as input, whose files are read as inputs; write it elsewhere"
                )));
            }
        } else if resolved == canonical || identity == Some((meta.dev(), meta.ino())) {
            return Err(refuse(format!(
                "it is the input {shown}; writing there would destroy it"
            )));
        }
    }
    Ok(())
}

/// Where writing to `path` lands: its symlinks resolved, also a dangling one's (writing through
/// it creates its target); for a file that does not exist yet, its folder's resolved.
fn resolve(path: &Path) -> PathBuf {
    let mut path = path.to_path_buf();
    // A bounded walk: a loop of links is left for the write to report.
    for _ in 0..40 {
        if let Ok(canonical) = std::fs::canonicalize(&path) {
            return canonical;
        }
        match std::fs::read_link(&path) {
            Ok(target) => {
                path = match path.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                }
            }
            Err(_) => break,
        }
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(parent), path.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => path.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(out: &Path, inputs: &[PathBuf]) -> String {
        check_out_not_input(out, inputs)
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn out_may_not_be_an_input_by_any_name() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("v.log");
        std::fs::write(&log, "log").unwrap();
        let inputs = [log.clone()];
        // The same path, spelled another way.
        let err = refused(&dir.path().join(".").join("v.log"), &inputs);
        assert!(err.contains("it is the input"), "{err}");
        // A symlink to it.
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&log, &link).unwrap();
        assert!(refused(&link, &inputs).contains("it is the input"));
        // A hard link of it, elsewhere.
        let other = tempfile::tempdir().unwrap();
        let hard = other.path().join("hard.txt");
        std::fs::hard_link(&log, &hard).unwrap();
        assert!(refused(&hard, &inputs).contains("it is the input"));
        // Another file is fine, existing or not.
        check_out_not_input(&other.path().join("report.html"), &inputs).unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "log");
    }

    #[test]
    fn out_may_not_be_inside_or_be_a_folder_given_as_input() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("node0.log"), "log").unwrap();
        let inputs = [dir.path().to_path_buf()];
        let err = refused(&dir.path().join("node0.log"), &inputs);
        assert!(
            err.contains("a folder given as input, whose files are read"),
            "{err}"
        );
        assert!(refused(&dir.path().join("new.txt"), &inputs).contains("inside"));
        assert!(refused(dir.path(), &inputs).contains("a folder given as input"));
        // Deeper inside, and through a dangling symlink whose target lies inside.
        assert!(refused(&dir.path().join("sub").join("r.txt"), &inputs).contains("inside"));
        let elsewhere = tempfile::tempdir().unwrap();
        let dangling = elsewhere.path().join("r.html");
        std::os::unix::fs::symlink(dir.path().join("new.html"), &dangling).unwrap();
        assert!(refused(&dangling, &inputs).contains("inside"));
        let other = tempfile::tempdir().unwrap();
        check_out_not_input(&other.path().join("r.txt"), &inputs).unwrap();
    }

    #[test]
    fn a_log_and_a_pickle_are_told_apart_by_their_first_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("run.log");
        std::fs::write(&log, "[rank=0] Before pipeline: alloc=1.0 GB\n").unwrap();
        let pickle = dir.path().join("x.pickle");
        std::fs::write(&pickle, b"\x80\x04\x95 binary").unwrap();
        assert_eq!(looks(&log), Looks::Text);
        assert_eq!(looks(&pickle), Looks::Pickle);
        assert!(refuse_snapshots_as_logs(std::slice::from_ref(&log)).is_ok());
        // Beside a log, a snapshot is the reader's to skip with a note.
        assert!(refuse_snapshots_as_logs(&[log.clone(), pickle.clone()]).is_ok());
        let err = refuse_snapshots_as_logs(std::slice::from_ref(&pickle)).unwrap_err();
        assert!(
            err.to_string().contains("a memory snapshot (a pickle)"),
            "{err}"
        );
        assert!(refuse_logs_as_snapshots("PICKLE", std::slice::from_ref(&pickle)).is_ok());
        let err = refuse_logs_as_snapshots("PICKLE", &[log]).unwrap_err();
        assert!(err.to_string().contains("not a memory snapshot"), "{err}");
        // A compressed snapshot is judged by its name.
        let zst = dir.path().join("s.pickle.zst");
        std::fs::write(&zst, b"\x28\xb5\x2f\xfd\x00").unwrap();
        assert!(refuse_snapshots_as_logs(&[zst]).is_err());
    }

    #[test]
    fn a_missing_input_is_left_to_the_command() {
        let dir = tempfile::tempdir().unwrap();
        check_out_not_input(&dir.path().join("out"), &[dir.path().join("missing.log")]).unwrap();
    }
}
