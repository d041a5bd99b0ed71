//! `memprints skill`: the agent skill `add-memory-prints` rewritten to call memprints (a page
//! instead of hand edits), printed, or written with `--write` to
//! `.agents/skills/add-memory-prints/SKILL.md` of the tree. It keeps the name, description
//! and trigger phrases of PithTrain's skill, so agents pick it up the same way. The text is
//! `crates/core/skill/SKILL.md`.
//!
//! A file memprints wrote holds [`MARKER`]; `--write` replaces only such a file (or none),
//! unless `--force`: PithTrain ships its own skill at that path.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use clap::Args;

use super::args::RepoArg;
use super::{ExitStatus, Output};

/// The skill's text.
pub const SKILL: &str = include_str!("../skill/SKILL.md");

/// Where the skill goes in a tree.
pub const SKILL_PATH: &str = ".agents/skills/add-memory-prints/SKILL.md";

/// The start of the line that says memprints wrote the file.
pub const MARKER: &str = "<!-- written by memprints skill";

/// `skill`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct SkillArgs {
    /// Write it to .agents/skills/add-memory-prints/SKILL.md of the tree instead of printing it.
    #[arg(long)]
    pub write: bool,
    /// With --write: replace a SKILL.md that memprints did not write (e.g. PithTrain's own).
    #[arg(long, requires = "write")]
    pub force: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub repo: RepoArg,
}

/// Runs `skill`.
pub fn run(args: SkillArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    if !args.write {
        out.write_all(SKILL.as_bytes())?;
        return Ok(ExitStatus::Success);
    }
    let repo = args.repo.open()?;
    let path = repo.root.join(SKILL_PATH);
    match std::fs::read(&path) {
        Ok(old) if old == SKILL.as_bytes() => {
            writeln!(out, "memprints: {} is up to date", path.display())?;
            return Ok(ExitStatus::Success);
        }
        Ok(old) if !args.force && !written_by_memprints(&old) => {
            return Err(memprints_codemod::Error::InvalidArgument {
                what: "skill --write",
                input: path.display().to_string(),
                reason: format!(
                    "the file there was not written by memprints (it has no `{MARKER}` line); pass --force to replace it"
                ),
            }
            .into());
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(memprints_codemod::Error::io(&path, e).into()),
    }
    write_atomically(&path, SKILL.as_bytes())?;
    writeln!(out, "memprints: wrote {}", path.display())?;
    Ok(ExitStatus::Success)
}

/// True when `text` holds the marker line.
pub fn written_by_memprints(text: &[u8]) -> bool {
    String::from_utf8_lossy(text)
        .lines()
        .any(|line| line.starts_with(MARKER))
}

/// Writes `path` through a temp file in its folder, so a reader sees the old file or the new.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().context("the skill path has a folder")?;
    std::fs::create_dir_all(dir).map_err(|e| memprints_codemod::Error::io(dir, e))?;
    let mut temp =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| memprints_codemod::Error::io(dir, e))?;
    use std::os::unix::fs::PermissionsExt;
    temp.write_all(bytes)
        .and_then(|()| {
            temp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))
        })
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| memprints_codemod::Error::io(temp.path(), e))?;
    temp.persist(path)
        .map_err(|e| memprints_codemod::Error::io(path, e.error))?;
    Ok(())
}
