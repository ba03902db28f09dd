//! The bench's command line: which rows, how many runs, where the JSON goes.

use std::path::PathBuf;

pub struct Opts {
    /// Started by `cargo bench` (which passes `--bench`), not by `cargo
    /// test --benches`/`--all-targets`, where the bench does nothing.
    pub bench: bool,
    quick: bool,
    pub json: PathBuf,
    only: Option<Vec<String>>,
}

impl Opts {
    pub fn parse() -> Opts {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut o = Opts { bench: false, quick: false, json: root.join("target").join("bench.json"), only: None };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                // cargo bench passes --bench to harness = false targets
                "--bench" => o.bench = true,
                "--quick" => o.quick = true,
                "--json" => o.json = PathBuf::from(args.next().expect("--json PATH")),
                "--only" => o.only = Some(args.next().expect("--only ROWS").split(',').map(str::to_string).collect()),
                "-h" | "--help" => {
                    println!("cargo bench --bench bench -- [--quick] [--json PATH] [--only slurmd-g,steps,usage,rss,check,health,steps-health]");
                    std::process::exit(0);
                }
                other => panic!("unknown argument {other:?} (try --help)"),
            }
        }
        o
    }
    pub fn wants(&self, group: &str) -> bool {
        match &self.only {
            None => true,
            Some(v) => v.iter().any(|g| g == group),
        }
    }
    /// `full` iterations normally, `quick` with --quick.
    pub fn n(&self, full: usize, quick: usize) -> usize {
        if self.quick {
            quick
        } else {
            full
        }
    }
}
