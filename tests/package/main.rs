//! The Debian package, as an admin uses it: `packaging/debian/build-deb.sh`
//! builds it from this checkout, `apt-get install ./<deb>` installs it, a
//! test cluster with `PluginDir=` from the package runs jobs with our
//! plugins, `gres-rs status` says so (and says stock once the directory is
//! out of `PluginDir` and the daemons restarted), `man gres-rs-check`
//! works, and `apt-get remove` leaves nothing behind.
//!
//! Installs a package on this machine, so it runs only as root with the
//! test bed's Slurm (tests/run.sh); a package installed before the test is
//! left installed, one the test installed is removed, pass or fail.
//!
//! The packages for the test bed's other Debian releases (trixie, sid) are
//! built with `build-deb.sh --for <suite>` and installed the same way
//! inside their chroot, in a copy-on-write overlay over it that the test
//! unmounts at the end (the cached chroot is not changed: checked).  There
//! the optional `slurm-gpu-gres-divert` package is also installed over the
//! main one (ours through Slurm's own plugin directory, no slurm.conf
//! change) and removed again (Slurm's files back, `dpkg --verify` clean);
//! it is never installed on this machine, whose stock files the other
//! tests use.
//!
//! Around the packages, what a node needs to keep starting slurmd (issue
//! 26): the slurmd drop-in (`slurmd-gres-rs-check.conf`), run exactly as
//! systemd runs its `ExecStartPre=`, skips a removed `gres-rs`, never asks
//! NVML, lets slurmd start when the check hangs and refuses only a fatal
//! verdict (`systemd-analyze verify` passes after removal); `postinst`,
//! the drop-in and the prerms return within seconds with a driver whose
//! `nvmlInit` does not (the NVML stand-in with `init_delay_ms`, asked
//! nothing: its call log); the prerms warn when, with `AutoDetect=nvml`,
//! removal leaves slurmd no `gpu_nvml.so` (Debian ships none).
//!
//! Each test lives in the module of its subject (`cargo test --test
//! package NAME` finds it by name); `common` and `hanging_nvml` hold what
//! they share.

mod chroot;
mod common;
mod deb;
mod drop_in;
mod hanging_nvml;
mod rpm;
mod snapshot;
