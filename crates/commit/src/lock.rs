//! One writer at a time: `.memprints/lock`, like git's `index.lock`.
//!
//! A command that may write takes the lock before it reads the tree and keeps it until it is done
//! (read → plan → write), so two runs cannot interleave. The lock holds the holder's pid, its
//! start time (`/proc/<pid>/stat`), the boot id, the host name and the command, and it is written
//! whole before it is visible: into `.lock-<pid>.memprints-tmp` beside it, fsynced, then renamed
//! into place with `renameat2(RENAME_NOREPLACE)` (or `link(2)` where the file system cannot),
//! which fails when a lock is there. So creating it is atomic and exclusive, and a kill or a full
//! disk can leave a temp file (removed by the next run) but never a lock with partial content.
//! A second writer refuses at once with [`Error::Locked`] naming the holder (refusing
//! rather than waiting: the other run may be an `add` with other ranks, and the user should
//! decide what comes next).
//!
//! A lock whose holder is gone does not strand the user. It is stale when the holder ran on this
//! host and the machine has rebooted since, its pid is no longer alive, or that pid now belongs
//! to a process that started at another time (reuse). A stale lock is taken over with a note
//! ([`Lock::took_over`]): the new holder writes its own lock beside it and swaps the two names
//! atomically (`renameat2(RENAME_EXCHANGE)`), then checks that what it swapped out is the stale
//! lock it judged; if not, another run took it over first and the names are swapped back. So the
//! lock file never disappears during a takeover and only one run wins. Where the file system
//! cannot exchange names, the stale lock is removed and created anew, and two runs taking over
//! the same stale lock at the same instant could both win. A lock from another host (a checkout
//! on a shared file system) is never judged stale: the message says to delete it by hand if that
//! run is gone. A lock that cannot be read (empty, cut off) was not written by a live memprints
//! of this kind: it is stale once it is a second old (memprints versions that wrote the lock
//! after creating it took microseconds), and a run that finds a younger one waits for that second
//! once. [`holder`] is the read-only check `status` makes.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::crash;
use super::fsio;
use super::journal::STATE_DIR;
use super::target::{TEMP_SUFFIX, temp_path};
use crate::error::{Error, Result};

const LOCK: &str = "lock";
/// How old an unreadable lock must be before it counts as stale.
const UNREADABLE_GRACE: Duration = Duration::from_secs(1);

/// What a lock file says about its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Holder {
    pid: u32,
    /// Field 22 of `/proc/<pid>/stat`: clock ticks from boot to the process's start.
    start: Option<String>,
    boot: Option<String>,
    host: Option<String>,
    command: String,
}

impl Holder {
    fn this_process(command: &str) -> Self {
        let pid = std::process::id();
        Holder {
            pid,
            start: start_time(pid),
            boot: read_trimmed("/proc/sys/kernel/random/boot_id"),
            host: read_trimmed("/proc/sys/kernel/hostname"),
            command: command.to_string(),
        }
    }

    /// `None` while the holder may still be running; else why the lock is stale.
    fn gone(&self, here: &Holder) -> Option<String> {
        if self.host != here.host {
            return None;
        }
        if self.boot.is_some() && self.boot != here.boot {
            return Some("the machine has restarted since".into());
        }
        let alive = rustix::process::Pid::from_raw(self.pid as i32).is_some_and(|pid| {
            !matches!(
                rustix::process::test_kill_process(pid),
                Err(rustix::io::Errno::SRCH)
            )
        });
        if !alive {
            return Some("it is no longer running".into());
        }
        match (&self.start, start_time(self.pid)) {
            (Some(then), Some(now)) if *then != now => {
                Some("its pid now belongs to another process".into())
            }
            _ => None,
        }
    }

    fn describe(&self, here: &Holder, since: Option<Duration>) -> String {
        let mut text = format!("`memprints {}`, pid {}", self.command, self.pid);
        if self.host != here.host {
            text.push_str(&format!(
                " on host {} (if it is no longer running there, delete the lock)",
                self.host.as_deref().unwrap_or("?")
            ));
        }
        if let Some(since) = since {
            text.push_str(&format!(", for {} s", since.as_secs()));
        }
        text
    }
}

/// A live run that holds a tree's lock: it is changing the tree right now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Busy {
    /// The holder's process id.
    pub pid: u32,
    /// Its command (`add`, `remove`).
    pub command: String,
    /// Its host, when it is another than this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "another memprints (pid {}", self.pid)?;
        if let Some(host) = &self.host {
            write!(f, " on host {host}")?;
        }
        write!(
            f,
            ", `{}`) is changing this tree right now; run `memprints status` again once it has finished",
            self.command
        )
    }
}

/// The run holding the lock of the tree at `root`, when one does and may still be running (as
/// [`Lock::acquire`] judges it: a lock from another host counts as held); `None` when there is
/// no lock or a stale one. Reads only.
pub fn holder(root: &Path) -> Option<Busy> {
    let found = fs::read(root.join(STATE_DIR).join(LOCK)).ok()?;
    let holder = serde_json::from_slice::<Holder>(&found).ok()?;
    let here = Holder::this_process("status");
    if holder.gone(&here).is_some() {
        return None;
    }
    Some(Busy {
        pid: holder.pid,
        host: holder.host.filter(|h| Some(h) != here.host.as_ref()),
        command: holder.command,
    })
}

/// The tree's lock, held until dropped.
#[derive(Debug)]
pub struct Lock {
    root: PathBuf,
    path: PathBuf,
    command: String,
    contents: Vec<u8>,
    took_over: Option<String>,
}

impl Lock {
    /// Takes the lock of the tree at `root` for `command` (`add`, `remove`…), taking over a stale
    /// one; refuses with [`Error::Locked`] while another run holds it.
    pub fn acquire(root: &Path, command: &str) -> Result<Lock> {
        let root = fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
        let dir = root.join(STATE_DIR);
        let path = dir.join(LOCK);
        let here = Holder::this_process(command);
        let contents = serde_json::to_vec(&here).expect("a holder always serialises");
        let held = |took_over: Option<String>| {
            sweep_takeover_leftovers(&dir);
            Lock {
                root: root.clone(),
                path: path.clone(),
                command: command.to_string(),
                contents: contents.clone(),
                took_over,
            }
        };
        let mut took_over = None;
        let mut waited = false;
        // A few rounds: a lock released or taken over between our steps sends us round again.
        for _ in 0..4 {
            // Made each round: a holder that released the lock removes the folder when empty.
            fs::create_dir_all(&dir).map_err(|e| fsio::error(&dir, e))?;
            let created = match create_exclusive(&path, &contents) {
                // The folder went between our steps: another run released the lock.
                Err(Error::Io { cause, .. }) if cause.kind() == std::io::ErrorKind::NotFound => {
                    continue;
                }
                created => created?,
            };
            if created {
                return Ok(held(took_over));
            }
            let Some((found, since)) = read_lock(&path)? else {
                continue;
            };
            let holder = serde_json::from_slice::<Holder>(&found).ok();
            let stale = match &holder {
                Some(holder) => holder.gone(&here).map(|why| {
                    format!(
                        "took over the lock of `memprints {}` (pid {}): {why}",
                        holder.command, holder.pid
                    )
                }),
                None if waited || since.is_none_or(|s| s >= UNREADABLE_GRACE) => {
                    Some("took over an unreadable lock file".into())
                }
                None => {
                    waited = true;
                    std::thread::sleep(UNREADABLE_GRACE.saturating_sub(since.unwrap_or_default()));
                    continue;
                }
            };
            let Some(note) = stale else {
                let holder = holder.map_or_else(
                    || "one that is just starting".to_string(),
                    |h| h.describe(&here, since),
                );
                return Err(Error::Locked {
                    lock: path.clone(),
                    holder,
                });
            };
            match take_over(&path, &found, &contents)? {
                Takeover::Won => return Ok(held(Some(note))),
                Takeover::Removed => took_over = Some(note),
                Takeover::Lost => took_over = None,
            }
        }
        Err(Error::Locked {
            lock: path,
            holder: "runs that keep taking and releasing it".into(),
        })
    }

    /// The tree's root, canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The command holding the lock.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// A note saying whose stale lock this one replaced, if it did.
    pub fn took_over(&self) -> Option<&str> {
        self.took_over.as_deref()
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        crash::point("releasing the lock");
        if fs::read(&self.path).is_ok_and(|now| now == self.contents) {
            let _ = fs::remove_file(&self.path);
            // `.memprints/` is there only while a command writes: gone once it is empty (no
            // journal of an interrupted commit, no other run's lock). `rmdir` removes only an
            // empty folder, so another run's lock or journal keeps it.
            if let Some(dir) = self.path.parent() {
                let _ = fs::remove_dir(dir);
            }
        }
    }
}

/// Creates the lock holding `contents`, whole from the instant it exists: written and fsynced
/// under a temp name, then given the lock's name only if no lock is there. `false` when one is.
fn create_exclusive(path: &Path, contents: &[u8]) -> Result<bool> {
    let temp = own_temp(path, std::process::id());
    fsio::remove(&temp)?;
    let file = fsio::create(&temp, contents)?;
    fsio::sync(&file, &temp)?;
    drop(file);
    let created = fsio::rename_no_replace(&temp, path);
    if !matches!(created, Ok(Some(true))) {
        fsio::remove(&temp)?;
    }
    match created? {
        Some(created) => Ok(created),
        None => create_then_write(path, contents),
    }
}

/// Where names can be neither renamed without replacing nor linked: `O_EXCL`, then the bytes.
/// A kill between the two leaves an unreadable lock, stale after [`UNREADABLE_GRACE`].
fn create_then_write(path: &Path, contents: &[u8]) -> Result<bool> {
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(mut file) => {
            file.write_all(contents).map_err(|e| fsio::error(path, e))?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(fsio::error(path, e)),
    }
}

/// The lock's bytes and age; `None` when it is gone.
fn read_lock(path: &Path) -> Result<Option<(Vec<u8>, Option<Duration>)>> {
    match fs::read(path) {
        Ok(bytes) => {
            let since = fs::metadata(path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok());
            Ok(Some((bytes, since)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// How an attempt to take over a stale lock ended.
enum Takeover {
    /// The lock is ours.
    Won,
    /// Another run took the stale lock over first; it holds the lock now.
    Lost,
    /// The file system cannot exchange names: the stale lock was removed, to be created anew.
    Removed,
}

/// Replaces the stale lock holding `stale` by one holding `contents`.
fn take_over(path: &Path, stale: &[u8], contents: &[u8]) -> Result<Takeover> {
    let temp = own_temp(path, std::process::id());
    fsio::remove(&temp)?;
    let file = fsio::create(&temp, contents)?;
    fsio::sync(&file, &temp)?;
    drop(file);
    match fsio::exchange(&temp, path) {
        Ok(true) => {}
        Ok(false) => {
            fsio::remove(&temp)?;
            fsio::remove(path)?;
            return Ok(Takeover::Removed);
        }
        // The stale lock is gone: another run took it over and has finished since.
        Err(_) if !path.exists() => {
            fsio::remove(&temp)?;
            return Ok(Takeover::Lost);
        }
        Err(e) => return Err(e),
    }
    let swapped_out = fs::read(&temp).map_err(|e| Error::io(&temp, e))?;
    if swapped_out != stale {
        // Give the winner's lock back; if it is gone already, the winner has finished.
        if let Err(e) = fsio::exchange(&temp, path)
            && path.exists()
        {
            return Err(e);
        }
        fsio::remove(&temp)?;
        return Ok(Takeover::Lost);
    }
    fsio::remove(&temp)?;
    Ok(Takeover::Won)
}

/// `.lock-<pid>.memprints-tmp`: the lock a run writes before renaming or swapping it in.
fn own_temp(path: &Path, pid: u32) -> PathBuf {
    temp_path(&path.with_file_name(format!("lock-{pid}")))
}

/// Removes the takeover temps of runs that are no longer alive.
fn sweep_takeover_leftovers(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(".lock-")?.strip_suffix(TEMP_SUFFIX))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let dead = rustix::process::Pid::from_raw(pid).is_none_or(|pid| {
            rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
        });
        if dead {
            let _ = fsio::remove(&entry.path());
        }
    }
}

/// A process's start time, when `/proc` says.
fn start_time(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19).map(str::to_string)
}

fn read_trimmed(path: &str) -> Option<String> {
    Some(fs::read_to_string(path).ok()?.trim().to_string())
}
