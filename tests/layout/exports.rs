//! `exports_<series>`: every function of our header is a defined dynamic
//! symbol of the series' libslurmfull.so.

use crate::header::parse_header;
use crate::series::Series;
use crate::symbols::dynamic_function_symbols;
use std::fs;
use std::path::Path;

pub fn check_exports(series: &'static str) {
    let Some(series) = Series::new(series) else { return };
    let header = parse_header(&series.header_path());
    let name = series.name;
    let hdr = &series.header;
    assert!(!header.functions.is_empty(), "Slurm {name}: parsed no function from {hdr}");
    let lib = match series.libslurmfull() {
        Ok(lib) => lib,
        Err(why) => {
            // Not even CI has a libslurmfull of every series yet.
            println!("layout: SKIP: Slurm {name}: {why}; cannot check that the functions of {hdr} are exported");
            return;
        }
    };
    assert!(
        library_has_version(&lib, name),
        "Slurm {name}: {} does not contain a {name}.<micro> version string: not a libslurmfull.so of Slurm {name}?",
        lib.display()
    );
    let symbols = dynamic_function_symbols(&lib);
    let missing: Vec<&str> = header.functions.iter().map(|f| f.name.as_str()).filter(|name| !symbols.contains_key(*name)).collect();
    println!("layout: Slurm {name}: {} functions of {hdr} checked against the dynamic symbols of {}", header.functions.len(), lib.display());
    assert!(
        missing.is_empty(),
        "Slurm {name}: functions declared in {hdr} but not defined (nm -D --defined-only) in \
         {}:\n  {}",
        lib.display(),
        missing.join("\n  ")
    );
}

/// Whether `lib` holds a string `SERIES.N` (Slurm's version string, e.g.
/// `24.11.5`), not preceded by a digit.
fn library_has_version(lib: &Path, series: &str) -> bool {
    let bytes = fs::read(lib).unwrap_or_else(|e| panic!("read {}: {e}", lib.display()));
    let pat = format!("{series}.");
    let pat = pat.as_bytes();
    bytes.windows(pat.len() + 1).enumerate().any(|(i, w)| w.starts_with(pat) && w[pat.len()].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit()))
}
