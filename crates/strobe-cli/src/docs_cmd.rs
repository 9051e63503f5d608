//! `strobe generate-docs` (hidden): man pages (clap_mangen) and shell completions
//! (clap_complete) written from the same clap definition the command line parses, so the
//! packaged pages and completions cannot drift from the binary that ships with them.
//! `scripts/package.sh` runs it before `cargo deb`.

use std::fs;
use std::path::{Path, PathBuf};

use clap::CommandFactory as _;
use clap_complete::Shell;

use crate::failure::Failure;

/// What `generate-docs` writes under its directory.
const LAYOUT: &str = "man/*.1 (one page per command: strobe.1, strobe-gen.1, strobe-lab-up.1, …), \
                      completions/bash/strobe, completions/zsh/_strobe, completions/fish/strobe.fish";

#[derive(clap::Args)]
#[command(after_help = LAYOUT)]
pub struct DocsArgs {
    /// Directory to write into (created when missing; files of the same names are replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub fn run(args: DocsArgs) -> Result<(), Failure> {
    let written = generate(crate::Cli::command(), &args.out)?;
    eprintln!(
        "strobe generate-docs: {} man pages and {} completion scripts in {}",
        written.man_pages.len(),
        written.completions.len(),
        args.out.display()
    );
    Ok(())
}

/// The files written, for the caller and the tests.
pub struct Written {
    pub man_pages: Vec<PathBuf>,
    pub completions: Vec<PathBuf>,
}

/// Writes the man pages and completions of `cmd` (the CLI's top-level command) under `out`.
pub fn generate(cmd: clap::Command, out: &Path) -> Result<Written, Failure> {
    if out.exists() && !out.is_dir() {
        return Err(Failure::BadInput(format!(
            "--out {}: exists and is not a directory; give a directory (it is created when missing)",
            out.display()
        )));
    }
    // clap_complete offers hidden subcommands too: the completions get a copy without them.
    let mut for_completion = without_hidden(&cmd).disable_help_subcommand(true);
    for_completion.build();
    // Built once: subcommands then carry their display names (`strobe-gen`) and the
    // propagated version. The `help` subcommand gets no page of its own (nor a completion).
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();

    let man_dir = out.join("man");
    make_dir(&man_dir)?;
    let mut man_pages = Vec::new();
    man_pages_of(&cmd, &man_dir, &mut man_pages)?;

    let mut completions = Vec::new();
    for (shell, dir, file) in [
        (Shell::Bash, "bash", "strobe"),
        (Shell::Zsh, "zsh", "_strobe"),
        (Shell::Fish, "fish", "strobe.fish"),
    ] {
        let dir = out.join("completions").join(dir);
        make_dir(&dir)?;
        let path = dir.join(file);
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut for_completion.clone(), "strobe", &mut script);
        write(&path, &script)?;
        completions.push(path);
    }
    Ok(Written {
        man_pages,
        completions,
    })
}

/// `cmd` (not yet built) without its hidden subcommands and arguments, at every level that
/// has any; a level without them is kept whole.
fn without_hidden(cmd: &clap::Command) -> clap::Command {
    let hidden = |s: &clap::Command| s.is_hide_set();
    if !cmd.get_subcommands().any(hidden) && !cmd.get_arguments().any(|a| a.is_hide_set()) {
        return cmd.clone();
    }
    let mut visible = clap::Command::new(cmd.get_name().to_owned())
        .propagate_version(cmd.is_propagate_version_set())
        .args(cmd.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(
            cmd.get_subcommands()
                .filter(|s| !hidden(s))
                .map(without_hidden),
        );
    if let Some(version) = cmd.get_version() {
        visible = visible.version(version.to_owned());
    }
    if let Some(about) = cmd.get_about() {
        visible = visible.about(about.clone());
    }
    visible
}

/// One page for `cmd` and one for each visible subcommand, recursively.
fn man_pages_of(
    cmd: &clap::Command,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> Result<(), Failure> {
    // The footer names the program and its version, as other tools' pages do (clap_mangen's
    // default is the subcommand's own name: "lab 0.1.0").
    let man =
        clap_mangen::Man::new(cmd.clone()).source(format!("strobe {}", env!("CARGO_PKG_VERSION")));
    let mut page = Vec::new();
    man.render(&mut page).map_err(|e| {
        Failure::Runtime(format!(
            "rendering the man page of `{}`: {e}",
            cmd.get_name()
        ))
    })?;
    let path = dir.join(man.get_filename());
    write(&path, &page)?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages_of(sub, dir, written)?;
    }
    Ok(())
}

fn make_dir(dir: &Path) -> Result<(), Failure> {
    fs::create_dir_all(dir)
        .map_err(|e| Failure::Runtime(format!("cannot create {}: {e}", dir.display())))
}

fn write(path: &Path, data: &[u8]) -> Result<(), Failure> {
    fs::write(path, data)
        .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("strobe-docs-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn message(f: Failure) -> String {
        match f {
            Failure::BadInput(m) | Failure::Runtime(m) => m,
            _ => "a failure of another kind".to_string(),
        }
    }

    #[test]
    fn a_page_per_visible_command_and_three_completions() {
        let out = scratch("all");
        let written =
            generate(crate::Cli::command(), &out).unwrap_or_else(|f| panic!("{}", message(f)));
        let names: Vec<String> = written
            .man_pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        // Every visible subcommand of the real CLI has its page, nested ones included.
        let cli = crate::Cli::command();
        for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
            let page = format!("strobe-{}.1", sub.get_name());
            assert!(names.contains(&page), "{page} missing from {names:?}");
            for nested in sub
                .get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            {
                let page = format!("strobe-{}-{}.1", sub.get_name(), nested.get_name());
                assert!(names.contains(&page), "{page} missing from {names:?}");
            }
        }
        for absent in ["strobe-generate-docs.1", "strobe-help.1"] {
            assert!(
                !names.contains(&absent.to_string()),
                "{absent} should have no page"
            );
        }
        assert!(names.contains(&"strobe.1".to_string()));

        // The page of `gen` names itself, its options and the version.
        let gen = fs::read_to_string(out.join("man/strobe-gen.1")).unwrap();
        assert!(gen.contains("strobe\\-gen"), "{gen}");
        assert!(gen.contains("\\-\\-rate"), "{gen}");
        assert!(gen.contains(env!("CARGO_PKG_VERSION")), "{gen}");

        let bash = fs::read_to_string(out.join("completions/bash/strobe")).unwrap();
        assert!(bash.contains("complete -F _strobe"), "{bash}");
        assert!(bash.contains("gen"));
        assert!(
            !bash.contains("generate-docs"),
            "the hidden command is not completed"
        );
        let zsh = fs::read_to_string(out.join("completions/zsh/_strobe")).unwrap();
        assert!(zsh.starts_with("#compdef strobe"), "{zsh}");
        let fish = fs::read_to_string(out.join("completions/fish/strobe.fish")).unwrap();
        assert!(fish.contains("complete -c strobe"), "{fish}");
        for (shell, script) in [("bash", &bash), ("zsh", &zsh), ("fish", &fish)] {
            for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
                assert!(
                    script.contains(sub.get_name()),
                    "{shell}: `{}` not offered",
                    sub.get_name()
                );
            }
            // clap_complete would offer hidden subcommands: they are taken out.
            assert!(
                !script.contains("generate-docs"),
                "{shell} offers the hidden generate-docs"
            );
        }
        assert_eq!(written.completions.len(), 3);
        fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn a_file_as_the_directory_is_refused_by_name() {
        let out = scratch("file");
        fs::write(&out, b"x").unwrap();
        let err = match generate(crate::Cli::command(), &out) {
            Err(Failure::BadInput(m)) => m,
            Err(other) => panic!("wrong kind: {}", message(other)),
            Ok(_) => panic!("a file was accepted as --out"),
        };
        assert!(
            err.contains("not a directory") && err.contains(&out.display().to_string()),
            "{err}"
        );
        fs::remove_file(&out).unwrap();
    }
}
