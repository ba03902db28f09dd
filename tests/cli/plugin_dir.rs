//! `check` predicts which plugin file slurmd loads from `PluginDir=`, and
//! searches slurmd's default PluginDir when there is none (issue 26, item 3).

use crate::install::{install_dir, install_into, stock_dir};
use crate::run::{conf, temp_dir, text, GRES_RS};
use slurm_gpu_gres::LIBRARY_FILE;
use std::fs;
use std::path::Path;
use std::process::Command;

/// `check` with our files in `ours` and slurm.conf's `PluginDir=<dirs>`:
/// its standard error, with `GRES_RS_SLURMD_VERSION=<slurmd>`.
fn check_plugin_dir(name: &str, dirs: &str, slurmd: &str) -> (Option<i32>, String) {
    let d = conf(name, &format!("GresTypes=gpu\nPluginDir={dirs}\nNodeName=n1 CPUs=8 Gres=gpu:1\n"), Some("Name=gpu File=/dev/null\n"));
    let slurm = d.0.join("slurm.conf");
    let out = Command::new(GRES_RS)
        .args(["check", "--node", "n1", "--verbose", "--slurm-conf"])
        .arg(&slurm)
        .env("GRES_RS_SLURMD_VERSION", slurmd)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (out.status.code(), text(&out.stderr))
}

#[test]
fn check_predicts_which_plugin_file_slurmd_loads() {
    let Some(ours) = install_dir("plugin-dir") else { return };
    let out = install_into(&ours.0, false);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stock = "/usr/lib/x86_64-linux-gnu/slurm-wlm";
    if !Path::new(stock).join("gres_gpu.so").is_file() {
        gres_test_harness::ledger::skipped("check_predicts_which_plugin_file_slurmd_loads", &format!("no stock plugins in {stock}"));
        return;
    }
    let o = ours.0.display().to_string();

    // Ours first: loaded.
    let (_, err) = check_plugin_dir("pd-ours", &format!("{o}:{stock}"), "22.05.8");
    assert!(err.contains(&format!("note: slurmd loads {o}/gres_gpu.so (ours, Slurm 22.05.8)")), "{err}");

    // The stock directory first: the stock file, and a warning naming ours.
    let (_, err) = check_plugin_dir("pd-stock-first", &format!("{stock}:{o}"), "22.05.8");
    assert!(
        err.contains(&format!(
            "warning: slurmd loads the stock {stock}/gres_gpu.so and not ours at {o}/gres_gpu.so: a directory with the stock plugins comes first in PluginDir"
        )),
        "{err}"
    );
    assert!(err.contains(&format!("= help: put {o} first in PluginDir")), "{err}");

    // The library missing beside our plugin file: slurmd passes over it.
    fs::remove_file(ours.0.join(LIBRARY_FILE)).unwrap();
    let (_, err) = check_plugin_dir("pd-nolib", &format!("{o}:{stock}"), "22.05.8");
    assert!(
        err.contains(&format!(
            "warning: slurmd passes over {o}/gres_gpu.so: {LIBRARY_FILE}, which it loads, is not beside it, so dlopen() fails, and loads {stock}/gres_gpu.so (stock, Slurm 22.05.8) instead"
        )),
        "{err}"
    );
    assert!(install_into(&ours.0, false).status.success());

    // A slurmd of another release refuses every file: it stops.
    let (code, err) = check_plugin_dir("pd-release", &format!("{o}:{stock}"), "24.11.5");
    assert!(
        err.contains(&format!("warning: slurmd passes over {o}/gres_gpu.so: it is built for Slurm 22.05.8, slurmd is 24.11.5, and finds no other")),
        "{err}"
    );
    assert!(err.contains(&format!("error[fatal]: slurmd finds no gres_gpu.so it can load in PluginDir={o}:{stock}: it stops")), "{err}");
    assert_eq!(code, Some(1), "{err}");
}

/// No `PluginDir=` in slurm.conf: `check` searches slurmd's compiled-in
/// default, the directory, even when the plugin files in it are dangling
/// links (the divert package installed, the main package removed with
/// --force-depends), and reports the same fatal problem as when that
/// directory is written out.  Root: the real slurmd and its default
/// directory, with a copy of it holding the dangling link bind-mounted over
/// it in a mount namespace of its own.
#[test]
fn check_searches_slurmds_default_plugin_dir_even_with_dangling_links() {
    let name = "check_searches_slurmds_default_plugin_dir_even_with_dangling_links";
    let Some(stock) = stock_dir() else {
        gres_test_harness::ledger::skipped(name, "no Slurm plugins installed");
        return;
    };
    if !Command::new("unshare").args(["--mount", "true"]).status().is_ok_and(|s| s.success()) {
        gres_test_harness::ledger::skipped(name, "no unshare --mount: not root?");
        return;
    }
    // The stock directory as the rollback leaves it: Slurm's library, and
    // gres_gpu.so a link to the removed package's file.
    let fake = temp_dir("default-plugin-dir");
    let dir = fake.0.join("plugins");
    fs::create_dir(&dir).unwrap();
    fs::copy(stock.join("libslurmfull.so"), dir.join("libslurmfull.so")).unwrap();
    std::os::unix::fs::symlink(fake.0.join("removed-package/gres_gpu.so"), dir.join("gres_gpu.so")).unwrap();
    let run = |conf_name: &str, plugin_dir: &str| {
        let d = conf(conf_name, &format!("GresTypes=gpu\n{plugin_dir}NodeName=n1 CPUs=8 Gres=gpu:1\n"), Some("Name=gpu File=/dev/null\n"));
        let out = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", "mount --bind \"$0\" \"$1\" && shift && exec \"$@\""])
            .arg(&dir)
            .arg(&stock)
            .arg(GRES_RS)
            .args(["check", "--node", "n1", "--slurm-conf"])
            .arg(d.0.join("slurm.conf"))
            .env("GRES_RS_SLURMD_VERSION", "22.05.8")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr))
    };
    let fatal = format!("error[fatal]: slurmd finds no gres_gpu.so it can load in PluginDir={}: it stops", stock.display());
    let (code, written) = run("pd-written", &format!("PluginDir={}\n", stock.display()));
    assert!(written.contains(&fatal), "{written}");
    assert_eq!(code, Some(1), "{written}");
    let (code, default) = run("pd-default", "");
    assert!(default.contains(&fatal), "{default}");
    assert!(default.contains("gres-rs: check: 0 nodes: 1 fatal, 0 errors, 0 warnings"), "{default}");
    assert_eq!(code, Some(1), "{default}");
}
