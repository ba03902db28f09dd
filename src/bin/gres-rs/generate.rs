//! `gres-rs generate man|completions DIR` (hidden): the man pages and the
//! shell completions, made from the same definitions as `--help`, for the
//! packages (packaging/) and for sites installing by hand.

use std::fs;
use std::path::Path;

use clap::{Command, CommandFactory};
use clap_complete::Shell;

use crate::{tool_error, Cli, GenerateArgs, GenerateWhat, EXIT_OK, EXIT_USAGE};

pub fn run(args: &GenerateArgs) -> u8 {
    if let Err(e) = fs::create_dir_all(&args.dir) {
        tool_error(format_args!("cannot create {}: {e}", args.dir.display()));
        return EXIT_USAGE;
    }
    let made = match args.what {
        GenerateWhat::Man => man_pages(&args.dir),
        GenerateWhat::Completions => completions(&args.dir),
    };
    match made {
        Ok(files) => {
            for f in files {
                println!("{f}");
            }
            EXIT_OK
        }
        Err(e) => {
            tool_error(e);
            EXIT_USAGE
        }
    }
}

/// `gres-rs.1` and one `gres-rs-<subcommand>.1` per visible subcommand
/// (`man gres-rs-check`).
fn man_pages(dir: &Path) -> Result<Vec<String>, String> {
    let root = Cli::command();
    let mut pages: Vec<(String, Command)> = vec![("gres-rs".to_string(), root.clone())];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("gres-rs-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name).version(root.get_version().unwrap_or_default().to_string())));
    }
    let mut written = Vec::new();
    for (name, cmd) in pages {
        let mut text = Vec::new();
        clap_mangen::Man::new(cmd).section("1").manual("slurm-gpu-gres").render(&mut text).map_err(|e| format!("rendering {name}.1: {e}"))?;
        let path = dir.join(format!("{name}.1"));
        fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

/// Completions for bash, zsh and fish, under the names those shells look
/// for (`gres-rs.bash`, `_gres-rs`, `gres-rs.fish`).
fn completions(dir: &Path) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut cmd = Cli::command();
        let path =
            clap_complete::generate_to(shell, &mut cmd, "gres-rs", dir).map_err(|e| format!("writing {shell} completions into {}: {e}", dir.display()))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}
