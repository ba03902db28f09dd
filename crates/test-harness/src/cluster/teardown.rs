//! Stopping a cluster: its daemons by PID, its strays, its directory.

use super::{Cluster, Daemon};
use crate::layout::keep_dirs;
use crate::{chroot, fsutil, process};
use std::fs;
use std::thread;
use std::time::Duration;

impl Cluster {
    /// SIGTERMs slurmd alone, by PID, and waits for it (SIGKILL after 10 s):
    /// its shutdown is in its log, which stays readable until [`Cluster::stop`].
    pub fn terminate_slurmd(&mut self) -> Option<std::process::ExitStatus> {
        let c = self.slurmd.as_mut()?;
        process::terminate_child(c, "Slurmd", Duration::from_secs(10))
    }

    /// SIGTERMs slurmctld alone, by PID, and waits for it (SIGKILL after
    /// 10 s): a test of what the nodes do without it;
    /// [`Cluster::start_slurmctld`] starts it again.
    pub fn stop_slurmctld(&mut self) -> Option<std::process::ExitStatus> {
        let c = self.slurmctld.as_mut()?;
        process::terminate_child(c, "Slurmctld", Duration::from_secs(10))
    }

    /// Stops everything this cluster started: cancels jobs, SIGTERMs
    /// slurmd, slurmctld, munged by PID (SIGKILL after a grace period),
    /// then any process still using the cluster's private dir (stray
    /// slurmstepd/tasks), and removes the dir unless GRES_RS_KEEP=1.
    /// Idempotent; also run by Drop.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let panicking = thread::panicking();
        if panicking {
            eprintln!("harness: test failed; logs of cluster {}:\n{}", self.name, self.log_tails(40));
        }
        if self.slurmctld.is_some() && self.pid(Daemon::Slurmctld).is_some() && self.pid(Daemon::Slurmd).is_some() {
            let _ = self.scancel(&["--full", "-u", "root"]);
            self.wait_no_jobs(Duration::from_secs(10));
        }
        // In a chroot each daemon has a mount namespace of its own, which
        // its slurmstepds and job tasks inherit: the strays' other mark.
        let namespaces = if self.config.chroot.is_some() { self.chroot_namespaces() } else { Vec::new() };
        for d in [Daemon::Slurmd, Daemon::Slurmctld] {
            let c = match d {
                Daemon::Slurmd => self.slurmd.as_mut(),
                _ => self.slurmctld.as_mut(),
            };
            if let Some(c) = c {
                process::terminate_child(c, &format!("{d:?}"), Duration::from_secs(10));
            }
            if d == Daemon::Slurmd {
                for (n, c) in self.node_daemons.iter_mut() {
                    process::terminate_child(c, &format!("slurmd of {n}"), Duration::from_secs(10));
                }
            }
        }
        // slurmdbd once slurmctld has sent it what it had, then its
        // database.
        if let Some(c) = self.slurmdbd.as_mut() {
            process::terminate_child(c, "slurmdbd", Duration::from_secs(10));
        }
        if let Some(mut db) = self.database.take() {
            db.stop();
        }
        // Several nodes: whatever is left in their network namespaces
        // (slurmstepd, tasks), then the namespaces themselves.
        if let Some(mut net) = self.net.take() {
            net.stop();
        }
        // Stray slurmstepd / job tasks of this cluster (identified by their
        // use of our private dir), deepest first not needed: TERM then KILL.
        for _ in 0..3 {
            let mut pids = process::pids_using_dir(&self.layout.root);
            pids.extend(namespaces.iter().flat_map(|ns| chroot::pids_in_mount_namespace(*ns)).filter(|p| !pids.contains(p)).collect::<Vec<_>>());
            let pids: Vec<u32> = pids.into_iter().filter(|p| Some(*p) != self.munged.as_ref().map(|c| c.id())).collect();
            if pids.is_empty() {
                break;
            }
            eprintln!("harness: stopping leftover processes of cluster {}: {pids:?}", self.name);
            for p in process::process_refs(&pids) {
                process::terminate_process(p, Duration::from_secs(3));
            }
        }
        // The strays are gone: the namespaces may go (and their inodes be
        // reused).
        self.ns_pins.clear();
        if let Some(c) = self.munged.as_mut() {
            process::terminate_child(c, "munged", Duration::from_secs(5));
        }
        if keep_dirs() {
            let _ = fs::remove_file(self.layout.root.join(fsutil::IN_USE_MARKER));
            eprintln!("harness: GRES_RS_KEEP=1: kept cluster dir {}", self.layout.root.display());
        } else if let Err(e) = fs::remove_dir_all(&self.layout.root) {
            eprintln!("harness: could not remove {}: {e}", self.layout.root.display());
        }
        self._guard = None;
    }

    /// The mount namespaces of the chroot-run slurmd and slurmctld (none
    /// shared with this process).
    fn chroot_namespaces(&self) -> Vec<u64> {
        use std::os::unix::fs::MetadataExt;
        let own = chroot::mount_namespace(std::process::id());
        let pinned = self.ns_pins.iter().filter_map(|f| f.metadata().ok()).map(|m| m.ino());
        let live = [Daemon::Slurmd, Daemon::Slurmctld].iter().filter_map(|d| self.pid(*d)).filter_map(chroot::mount_namespace);
        let mut v: Vec<u64> = pinned.chain(live).filter(|ns| Some(*ns) != own).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}
