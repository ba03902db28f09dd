//! The RPM spec: parsed, linted, made into a source package.

use crate::common::{assert_prerm_warns, run, PACKAGE};
use crate::hanging_nvml::{nvml_node_conf, HangingNvml, QUICK};
use gres_test_harness as harness;
use harness::*;
use std::process::Command;
use std::time::Instant;

/// The RPM spec, for sites that build Slurm's RPMs from SchedMD's tarball:
/// rpm's own parser takes it for a given release (the release is in the
/// package's release and in its exact requirements), rpmlint finds no
/// error, and rpmbuild makes the source package.  The binary build
/// (`rpmbuild -bb`, a full release build of the workspace) is verified by
/// hand (docs/install.md).
#[test]
fn the_rpm_spec_parses_lints_and_makes_a_source_package() {
    let have = |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !have("rpmspec") || !have("rpmbuild") {
        assert!(!strict_mode(), "rpmspec/rpmbuild missing (tests/setup-debian.sh installs rpm)");
        harness::ledger::skipped("the_rpm_spec_parses_lints_and_makes_a_source_package", "no rpmspec/rpmbuild");
        return;
    }
    let spec = workspace_root().join("packaging/rpm/slurm-gpu-gres.spec");
    let (ok, parsed) = run(Command::new("rpmspec").arg("-P").arg(&spec).args(["--define", "slurm_version 24.05.8"]));
    assert!(ok, "rpmspec -P:\n{parsed}");
    let version = env!("CARGO_PKG_VERSION");
    // The library in a package of its own, which the plugin files'
    // requires, so that rpm installs it first (docs/install.md, "Upgrades").
    let libs =
        format!("%files libs\n%license packaging/debian/copyright\n%dir %{{_libdir}}/slurm-gpu-gres\n%{{_libdir}}/slurm-gpu-gres/libgres_rs-{version}.so");
    assert!(
        parsed.lines().any(|l| l.starts_with("Requires:       slurm-gpu-gres-libs") && l.ends_with(&format!(") = {version}-1.slurm24.05.8"))),
        "the plugin files do not require their library's package:\n{parsed}"
    );
    for want in
        ["Release:        1.slurm24.05.8", "BuildRequires:  slurm-devel = 24.05.8", "Requires:       slurm = 24.05.8", "%{_libdir}/slurm-gpu-gres", &libs]
    {
        let want = want.replace("%{_libdir}", "/usr/lib64");
        assert!(parsed.contains(&want), "{want} not in the parsed spec:\n{parsed}");
    }
    // The scriptlets as rpm runs them (sh, $1 the count left), with
    // AutoDetect=nvml and a wedged driver: every gres-rs run is time-limited
    // and without NVML, each returns within seconds, asking NVML nothing;
    // %preun tells that slurmd, which picks gpu/nvml, finds no gpu_nvml.so
    // once the package is gone.
    let conf_dir = TempDir::new(&format!("gres-rs-rpm-conf-{}", std::process::id()));
    let (conf, gres) = nvml_node_conf(&format!("/usr/lib64/slurm-gpu-gres:{}", stock_plugin_dir().display()));
    std::fs::write(conf_dir.0.join("slurm.conf"), conf).unwrap();
    std::fs::write(conf_dir.0.join("gres.conf"), gres).unwrap();
    let nvml = HangingNvml::new("rpm");
    let mut env = nvml.env.clone();
    env.push(("SLURM_CONF".into(), conf_dir.0.join("slurm.conf").display().to_string()));
    let mut outputs = Vec::new();
    for (name, count) in [("%post", "1"), ("%preun", "0")] {
        let body: Vec<&str> = parsed.lines().skip_while(|l| *l != name).skip(1).take_while(|l| !l.starts_with('%')).collect();
        let body = body.join("\n");
        assert!(body.contains("exit 0"), "no {name} scriptlet in the parsed spec:\n{parsed}");
        for l in body.lines().filter(|l| l.contains("/gres-rs check")) {
            assert!(l.contains("timeout -k ") && l.contains("--no-detect"), "{name} runs gres-rs without a time limit or with NVML: {l}");
        }
        let body = body.replace("/usr/bin/gres-rs", env!("CARGO_BIN_EXE_gres-rs"));
        let t = Instant::now();
        let (ok, out) = run(Command::new("sh").arg("-c").arg(&body).arg(name).arg(count).envs(env.iter().map(|(k, v)| (k, v))));
        assert!(ok && t.elapsed() < QUICK, "{name} (AutoDetect=nvml, hanging NVML) failed or took {:?}:\n{out}", t.elapsed());
        nvml.assert_untouched(name);
        outputs.push(out);
    }
    assert!(outputs[0].contains("gres-rs check --quiet --no-detect"), "%post runs no check:\n{}", outputs[0]);
    assert_prerm_warns(&outputs[1], PACKAGE);
    if have("rpmlint") {
        // Debian's rpmlint checks Mandriva's naming too: a -libs package
        // named without %mklibname is an error there, and the convention
        // of the RHEL-like systems this spec is for.
        let mandriva_only = "E: lib-package-without-%mklibname";
        let (_, lint) = run(Command::new("rpmlint").arg(&spec));
        let errors = lint.lines().filter(|l| l.contains(" E: ") && !l.contains(mandriva_only)).count();
        let counted = lint.lines().find_map(|l| l.split_once(" errors").and_then(|(n, _)| n.rsplit(' ').next()?.parse::<usize>().ok()));
        let ignored = lint.lines().filter(|l| l.contains(mandriva_only)).count();
        assert!(errors == 0 && counted == Some(ignored), "rpmlint:\n{lint}");
    }
    let top = target_dir().join("rpm-test");
    let _ = std::fs::remove_dir_all(&top);
    std::fs::create_dir_all(top.join("SOURCES")).unwrap();
    let tarball = top.join("SOURCES/slurm-gpu-gres-0.1.0.tar.gz");
    let (ok, out) =
        run(Command::new("git").arg("-C").arg(workspace_root()).args(["archive", "--prefix=slurm-gpu-gres-0.1.0/", "-o"]).arg(&tarball).arg("HEAD"));
    assert!(ok, "git archive: {out}");
    let (ok, out) = run(Command::new("rpmbuild")
        .args(["-bs", "--nodeps", "--define"])
        .arg(format!("_topdir {}", top.display()))
        .args(["--define", "slurm_version 24.05.8"])
        .arg(&spec));
    assert!(ok, "rpmbuild -bs:\n{out}");
    assert!(top.join("SRPMS/slurm-gpu-gres-0.1.0-1.slurm24.05.8.src.rpm").is_file(), "no source RPM:\n{out}");
}
