//! Runs the user's PithTrain memory estimator: finds it in their tree, runs it with their Python
//! through the embedded driver (`driver.py`), under a timeout, and reads one [`Estimate`] per pp
//! rank.
//!
//! Contract: nothing is written into the tree (`-B`: no `__pycache__`); the interpreter runs
//! isolated (`-I`: no `PYTHONPATH`, no user site, no current directory on `sys.path`) with the
//! tree first on its path, and the driver refuses any `torch` import. The driver reads the estimator's objects;
//! when it reports that they changed shape, each rank is run again through the estimator's
//! text output ([`super::text`]) and the estimate says so in its notes. A timeout kills the
//! interpreter. Every failure is one [`EstimateError`].

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use wait_timeout::ChildExt;

use super::EstimateError;
use super::caveats::caveats;
use super::figures::{Estimate, from_driver_output};
use super::settings::RunSettings;
use super::text::from_text;

/// The Python driver, run with `python -I -c`.
const DRIVER: &str = include_str!("driver.py");
/// The driver's exit codes (see `driver.py`).
const EXIT_INTERFACE_CHANGED: i32 = 4;
const EXIT_TORCH_IMPORTED: i32 = 5;
const NO_MESSAGE: &str = "(no message)";

/// How to run the estimator.
#[derive(Debug, Clone)]
pub struct EstimatorOptions {
    /// The PithTrain checkout holding `tools/memory_estimator/`.
    pub tree: PathBuf,
    /// The interpreter: the user's `python3` unless `--python` names another.
    pub python: OsString,
    /// For each interpreter run (one for all ranks; one per rank on the text fallback).
    pub timeout: Duration,
}

impl EstimatorOptions {
    /// `python3` and a 120 s timeout.
    pub fn new(tree: impl Into<PathBuf>) -> Self {
        Self {
            tree: tree.into(),
            python: "python3".into(),
            timeout: Duration::from_secs(120),
        }
    }
}

/// `tree/tools/memory_estimator`, when it holds the estimator's entry point.
pub fn locate(tree: &Path) -> Result<PathBuf, EstimateError> {
    let dir = tree.join("tools").join("memory_estimator");
    if dir.join("__main__.py").is_file() {
        Ok(dir)
    } else {
        Err(EstimateError::EstimatorNotFound {
            tree: tree.to_path_buf(),
        })
    }
}

/// What an interpreter run left behind.
struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run_python(options: &EstimatorOptions, args: &[OsString]) -> Result<Finished, EstimateError> {
    let mut child = Command::new(&options.python)
        .arg("-I")
        .arg("-B")
        .arg("-c")
        .arg(DRIVER)
        .args(args)
        .current_dir(&options.tree)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| EstimateError::PythonNotFound {
            python: options.python.to_string_lossy().into_owned(),
            source,
        })?;
    // Both pipes are drained while waiting, so a chatty estimator cannot block on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let io = |source| EstimateError::Io {
        what: "waiting for the memory estimator".to_owned(),
        source,
    };
    let status = match child.wait_timeout(options.timeout).map_err(io)? {
        Some(status) => status,
        None => {
            child.kill().map_err(io)?;
            child.wait().map_err(io)?;
            return Err(EstimateError::TimedOut {
                seconds: options.timeout.as_secs(),
            });
        }
    };
    Ok(Finished {
        code: status.code(),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(NO_MESSAGE)
        .to_owned()
}

/// Turns a failed run into its error; `None` when it succeeded.
fn failure(run: &Finished) -> Option<EstimateError> {
    match run.code {
        Some(0) => None,
        Some(EXIT_TORCH_IMPORTED) => Some(EstimateError::TorchImported {
            module: last_line(&run.stderr)
                .rsplit(' ')
                .next()
                .unwrap_or("torch")
                .to_owned(),
        }),
        code => Some(EstimateError::EstimatorFailed {
            last_line: match (code, last_line(&run.stderr)) {
                (None, line) if line == NO_MESSAGE => "killed by a signal".to_owned(),
                (_, line) => line,
            },
        }),
    }
}

/// Runs the estimator for each of `pp_ranks` with `settings`; one [`Estimate`] per rank, in
/// order, each carrying the caveats of the run's model config and the settings' assumptions.
pub fn estimate(
    options: &EstimatorOptions,
    settings: &RunSettings,
    pp_ranks: &[u32],
) -> Result<Vec<Estimate>, EstimateError> {
    locate(&options.tree)?;
    if pp_ranks.is_empty() {
        return Ok(Vec::new());
    }
    let flags = settings.estimator_flags();
    let ranks = pp_ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut args: Vec<OsString> = vec!["json".into(), options.tree.clone().into(), ranks.into()];
    args.extend(flags.iter().cloned());
    let run = run_python(options, &args)?;
    let mut estimates = if run.code == Some(EXIT_INTERFACE_CHANGED) {
        let reason = last_line(&run.stderr);
        from_text_runs(options, &flags, pp_ranks, &reason)?
    } else if let Some(err) = failure(&run) {
        return Err(err);
    } else {
        from_driver_output(&run.stdout)?
    };
    let config = std::fs::read_to_string(&settings.model_config)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
    for estimate in &mut estimates {
        if let Some(config) = &config {
            let found = caveats(config, estimate);
            estimate.notes.extend(found);
        }
        estimate.notes.extend(settings.notes());
    }
    Ok(estimates)
}

fn from_text_runs(
    options: &EstimatorOptions,
    flags: &[OsString],
    pp_ranks: &[u32],
    reason: &str,
) -> Result<Vec<Estimate>, EstimateError> {
    pp_ranks
        .iter()
        .map(|rank| {
            let mut args: Vec<OsString> = vec!["text".into(), options.tree.clone().into()];
            args.extend(flags.iter().cloned());
            let rank = rank.to_string();
            let extra = [
                "--pp-rank",
                &rank,
                "--detail",
                "--timeline",
                "--timeline-limit",
                "0",
            ];
            args.extend(extra.iter().map(OsStr::new).map(OsString::from));
            let run = run_python(options, &args)?;
            if let Some(err) = failure(&run) {
                return Err(err);
            }
            let mut estimate = from_text(&run.stdout)?;
            estimate.notes.insert(
                0,
                format!("the driver could not read the estimator's objects ({reason})"),
            );
            Ok(estimate)
        })
        .collect()
}
