//! The Slurm release: `--version`, values of later releases, releases we
//! do not support.

use crate::run::{check, conf, gres_rs, text, SLURM};

#[test]
fn version_names_the_slurm_release() {
    let out = gres_rs(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), format!("gres-rs {} (plugins for Slurm {})\n", env!("CARGO_PKG_VERSION"), slurm_gpu_gres::SLURM_VERSION));
}

const RELEASE_GRES: &str = "AutoDetect=full\nName=gpu File=/dev/nvidia[0-1] Flags=nvidia_gpu_env,env_uuid\n";

#[test]
fn values_of_later_releases_name_their_release() {
    let d = conf("release", SLURM, Some(RELEASE_GRES));
    let gres = d.0.join("gres.conf");
    let out = check(&d, &["--node", "n1", "--no-device-check", "--slurm-release", "24.11"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let expected_error = format!(
        "error: unknown autodetect flag 'full' (AutoDetect=full exists from Slurm 26.05.0; checked for Slurm 24.11)\n \
         --> {}:1:12\n  |\n1 | AutoDetect=full\n  |            ^^^^\n",
        gres.display()
    );
    assert!(err.contains(&expected_error), "{err}");
    let expected_warning = format!(
        "warning: Flags word \"env_uuid\" is unknown to this Slurm release, which ignores it (Flags=env_uuid exists from Slurm 26.05.0; checked for Slurm 24.11)\n \
         --> {}:2:53\n  |\n2 | Name=gpu File=/dev/nvidia[0-1] Flags=nvidia_gpu_env,env_uuid\n  |                                                     --------\n",
        gres.display()
    );
    assert!(err.contains(&expected_warning), "{err}");
    assert!(err.ends_with("gres-rs: check: 1 node: 0 fatal, 1 error, 1 warning\n"), "{err}");
    // slurmd 24.11 reads AutoDetect=full as no AutoDetect.
    assert!(text(&out.stdout).starts_with("n1: 8 CPUs, AutoDetect=unset, from gres.conf\n"), "{}", text(&out.stdout));

    // 26.05 knows both.
    let out = check(&d, &["--node", "n1", "--no-device-check", "--slurm-release", "26.05.3"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("n1: 8 CPUs, AutoDetect=full, from gres.conf; detection (AutoDetect=full) runs on the node, not here\n"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stderr).ends_with("gres-rs: check: 1 node: 0 fatal, 0 errors, 0 warnings\n"), "{}", text(&out.stderr));

    // Flags=explicit exists from 23.02, AutoDetect=nvidia from 24.11.
    let d = conf("release-old", SLURM, Some("NodeName=n1 AutoDetect=nvidia\nName=gpu File=/dev/nvidia[0-1] Flags=Explicit\n"));
    let out = check(&d, &["--node", "n1", "--no-device-check", "--slurm-release", "22.05.8", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["slurm_release"], "22.05.8");
    let problems: Vec<(String, String, u64, u64)> = v["nodes"][0]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["severity"].as_str().unwrap_or("").to_string(),
                p["message"].as_str().unwrap().to_string(),
                p["line"].as_u64().unwrap(),
                p["column"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(
        problems.contains(&(
            "error".into(),
            "unknown autodetect flag 'nvidia' (AutoDetect=nvidia exists from Slurm 24.11.0; checked for Slurm 22.05.8)".into(),
            1,
            24
        )),
        "{problems:?}"
    );
    assert!(
        problems.contains(&(
            "warning".into(),
            "Flags word \"explicit\" is unknown to this Slurm release, which ignores it (Flags=explicit exists from Slurm 23.02.0; checked for Slurm 22.05.8)"
                .into(),
            2,
            38
        )),
        "{problems:?}"
    );
    let out = check(&d, &["--node", "n1", "--no-device-check", "--slurm-release", "24.11", "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn unsupported_slurm_releases_are_refused() {
    let d = conf("release-bad", SLURM, Some(""));
    for (release, message) in [
        (
            "21.08",
            "gres-rs: error: --slurm-release: Slurm 21.08 is not supported: supported series are 22.05, 23.02, 23.11, 24.05, 24.11, 25.05, 25.11, 26.05\n",
        ),
        ("24", "gres-rs: error: --slurm-release: '24' is not a Slurm release: want MAJOR.MINOR or MAJOR.MINOR.MICRO, e.g. 24.11 or 24.11.5\n"),
        ("24.11.x", "gres-rs: error: --slurm-release: '24.11.x' is not a Slurm release: want MAJOR.MINOR or MAJOR.MINOR.MICRO, e.g. 24.11 or 24.11.5\n"),
    ] {
        let out = check(&d, &["--node", "n1", "--slurm-release", release]);
        assert_eq!(out.status.code(), Some(2), "{release}");
        assert_eq!(text(&out.stderr), message);
        assert!(out.stdout.is_empty());
    }
}
