//! The dynamic symbols of a shared object, as binutils' `nm -D` lists
//! them.

use std::path::Path;
use std::process::Command;

/// One dynamic symbol of a shared object, as `nm -D` lists it.
pub struct DynSymbol {
    /// Without its `@VERSION`.
    pub name: String,
    /// nm's type letter: `T` code, `D`/`R`/`B` data, `U` undefined, `w`
    /// weak undefined, ...
    pub kind: String,
    /// `None` for undefined symbols.
    pub address: Option<String>,
}

impl DynSymbol {
    /// Defined in this object (not `U`, `w` or `v` without an address).
    pub fn defined(&self) -> bool {
        self.address.is_some()
    }
}

/// The dynamic symbols of `lib` (`nm -D`, binutils).
pub fn dynamic_symbols(lib: &Path) -> Vec<DynSymbol> {
    let out = Command::new("nm").arg("-D").arg(lib).output().unwrap_or_else(|e| panic!("cannot run nm (binutils): {e}"));
    assert!(out.status.success(), "nm -D {} failed: {}", lib.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (address, kind, name) = match line.split_whitespace().collect::<Vec<_>>()[..] {
                [address, kind, name] => (Some(address.to_string()), kind, name),
                [kind, name] => (None, kind, name),
                _ => return None,
            };
            Some(DynSymbol { name: name.split('@').next().unwrap_or(name).to_string(), kind: kind.to_string(), address })
        })
        .collect()
}
