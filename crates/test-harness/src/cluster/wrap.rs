//! Commands around a slurmd: a wrapper program (`slurmd_g_wrapper`), and
//! the host's mount namespace that shows slurmd a `mig-minors` file.

use crate::config::ClusterConfig;
use crate::tools::tool;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `cmd` run by `wrapper` (host programs, e.g. `timeout 20 prlimit
/// --as=N --`; empty: `cmd` itself): the wrapper's words, then `cmd`'s
/// program and arguments (for a chroot's program its `unshare ...
/// chroot` line: what the wrapper sets, an rlimit, is inherited across
/// those `exec`s), with `cmd`'s environment and directory.
pub(super) fn wrapped(cmd: Command, wrapper: &[String]) -> Command {
    let Some((program, args)) = wrapper.split_first() else { return cmd };
    let mut w = Command::new(program);
    w.args(args).arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => w.env(k, v),
            None => w.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        w.current_dir(d);
    }
    w
}

/// The environment variable that gives a daemon's slurmd the driver's
/// `mig-minors` file (a host path): a chroot's commands mount it where the
/// driver has it ([`chroot::Chroot::command`](crate::chroot::Chroot::command)), and so does the host's
/// slurmd's own mount namespace the harness makes.
pub const MIG_MINORS_ENV: &str = "GRES_RS_TEST_MIG_MINORS";

/// Run by the host's `/bin/sh` in a mount namespace of its own: a tmpfs
/// over `/proc/driver` with `$GRES_RS_TEST_MIG_MINORS` bound at
/// `nvidia-caps/mig-minors`, then `exec` of the rest (same PID).
const HOST_MIG_MINORS_SCRIPT: &str = r#"set -e
mount -t tmpfs -o mode=755 gres-rs-test /proc/driver
mkdir -p /proc/driver/nvidia-caps
: >/proc/driver/nvidia-caps/mig-minors
mount --bind "$GRES_RS_TEST_MIG_MINORS" /proc/driver/nvidia-caps/mig-minors
exec "$@"
"#;

/// `cmd` (a slurmd of `config`) on the host in a mount namespace of
/// its own where `/proc/driver/nvidia-caps/mig-minors`, the one place the
/// stock gpu/nvml reads MIG minors from (and ours in a release build), is
/// the file its [`MIG_MINORS_ENV`] names, as the NVIDIA driver makes it;
/// `cmd` itself in a chroot (whose commands mount the file themselves),
/// where it has no such variable, or where the file is there already (a
/// caller in such a namespace).  `unshare` without `--fork` and
/// `exec`: the PID is the program's; the namespace and its mounts end with
/// its last process (slurmd's slurmstepds inherit it).
pub(super) fn with_mig_minors(cmd: Command, config: &ClusterConfig) -> Command {
    if config.chroot.is_some() {
        return cmd;
    }
    let Some(file) = cmd.get_envs().find(|(k, _)| *k == MIG_MINORS_ENV).and_then(|(_, v)| v.map(PathBuf::from)) else { return cmd };
    let driver = Path::new(gres_core::nvml_model::MIG_MINORS_PATH);
    if fs::read(driver).ok().is_some_and(|have| fs::read(&file).ok() == Some(have)) {
        return cmd;
    }
    let wrapper = [
        tool("unshare").to_string_lossy().into_owned(),
        "--mount".into(),
        "--propagation".into(),
        "private".into(),
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        HOST_MIG_MINORS_SCRIPT.into(),
        "host-mig-minors".into(),
    ];
    wrapped(cmd, &wrapper)
}
