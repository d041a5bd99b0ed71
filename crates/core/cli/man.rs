//! `memprints man`: man pages generated from the same clap definitions the binary parses with
//! (clap_mangen): `memprints(1)` to stdout, or one page per command into `--out DIR`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, CommandFactory};

use super::{Cli, ExitStatus, Output};

/// `man`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// Write memprints.1 and a memprints-COMMAND.1 per command into this folder instead.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Writes the man page(s).
pub fn run(args: ManArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    let command = Cli::command();
    match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("cannot write the man pages to {}", dir.display()))?;
            writeln!(out, "memprints: man pages written to {}", dir.display())?;
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            out.write_all(&page)?;
        }
    }
    Ok(ExitStatus::Success)
}
