//! `memprints completions SHELL`: the shell completion script, from the same clap definitions
//! the binary parses with (clap_complete).

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{Cli, ExitStatus, Output};

/// `completions`' arguments.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (also elvish, powershell).
    pub shell: Shell,
}

/// Writes the completion script to stdout.
pub fn run(args: CompletionsArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "memprints", &mut script);
    std::io::Write::write_all(out, &script)?;
    Ok(ExitStatus::Success)
}
