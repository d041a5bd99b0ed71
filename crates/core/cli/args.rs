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

/// A parallel size: 1 to [`MAX_SIZE`].
fn size() -> clap::builder::RangedI64ValueParser<u32> {
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

impl ParallelArgs {
    /// The sizes given (`None` when neither `--pp` nor `--script` is), checked.
    pub fn resolve(&self) -> anyhow::Result<Option<Parallel>> {
        let parallel = if let Some(script) = &self.script {
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
/// saying so in one line.
pub fn lock_and_recover(
    root: &Path,
    command: &str,
    out: &mut Output,
) -> anyhow::Result<memprints_commit::Lock> {
    let lock = memprints_commit::Lock::acquire(root, command)?;
    if let Some(note) = lock.took_over() {
        out.note(format_args!("note: {note}"));
    }
    if let Some(recovered) =
        memprints_commit::recover(&lock, &memprints_codemod::pithtrain::TARGET_FOLDERS)?
    {
        use std::io::Write;
        out.wrote_files(recovered.restored.len());
        writeln!(out, "memprints: {recovered}")?;
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
    fn a_missing_input_is_left_to_the_command() {
        let dir = tempfile::tempdir().unwrap();
        check_out_not_input(&dir.path().join("out"), &[dir.path().join("missing.log")]).unwrap();
    }
}
