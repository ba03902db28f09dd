//! Starting a cluster: munged, slurmdbd, slurmctld and the slurmds, up to
//! the nodes' state and the proof of loading.

use super::lock::{lock_clusters, ClusterLock};
use super::wrap::with_mig_minors;
use super::{field, Cluster, Daemon, Place};
use crate::cluster_files::prepare;
use crate::config::ClusterConfig;
use crate::host::prereq_problems;
use crate::layout::keep_dirs;
use crate::tools::find_tool;
use crate::{accounting, chroot, fsutil, netns, process};
use std::fs;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

impl Cluster {
    /// Starts a cluster; panics (with log tails) when it cannot.
    #[track_caller]
    pub fn start(config: ClusterConfig) -> Cluster {
        match Cluster::try_start(config) {
            Ok(c) => c,
            Err(e) => panic!("cluster failed to start:\n{e}"),
        }
    }

    /// Starts a cluster: munged, slurmctld, slurmd; waits for the node to be
    /// IDLE; for Ours verifies the daemons mapped our files. Retries with
    /// new ports if one was taken meanwhile.
    pub fn try_start(config: ClusterConfig) -> Result<Cluster, String> {
        Cluster::try_start_daemons(config, false)
    }

    /// Only munged, with the cluster's files written (slurm.conf, gres.conf,
    /// fake GPUs, our plugins): what `slurmd -G` of Slurm 24.11 and later
    /// needs (auth/munge's `init()` creates a credential in every daemon,
    /// src/plugins/auth/munge/auth_munge.c), without a slurmctld or a
    /// slurmd daemon, so that a configuration slurmd refuses can be shown
    /// too.  No proof of loading here (no daemon maps ours):
    /// [`Cluster::slurmd_g_in`]'s file list is that proof.
    pub fn try_start_munged(config: ClusterConfig) -> Result<Cluster, String> {
        Cluster::try_start_daemons(config, true)
    }

    fn try_start_daemons(config: ClusterConfig, munged_only: bool) -> Result<Cluster, String> {
        let problems = match &config.chroot {
            Some(r) => r.problems(),
            None => prereq_problems(),
        };
        if let Some(p) = problems.first() {
            return Err(format!("prerequisite missing: {p}"));
        }
        if config.is_multi() {
            if let Some(t) = netns::TOOLS.iter().find(|t| find_tool(t).is_none()) {
                return Err(format!("prerequisite missing: `{t}` (several nodes need iproute2's ip and util-linux's nsenter and unshare)"));
            }
        }
        let guard = lock_clusters();
        let mut guard = Some(guard);
        let mut last_err = String::new();
        for attempt in 0..3 {
            match Cluster::start_once(&config, &mut guard, munged_only) {
                Ok(c) => return Ok(c),
                Err((e, port_clash)) => {
                    last_err = e;
                    if !port_clash {
                        break;
                    }
                    eprintln!("harness: port clash on attempt {}, retrying", attempt + 1);
                }
            }
        }
        Err(last_err)
    }

    fn start_once(config: &ClusterConfig, guard: &mut Option<ClusterLock>, munged_only: bool) -> Result<Cluster, (String, bool)> {
        static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("grs{}x{seq}", std::process::id());
        let ctld_port = fsutil::free_port(&[]).map_err(|e| (format!("free port: {e}"), false))?;
        let slurmd_port = fsutil::free_port(&[ctld_port]).map_err(|e| (format!("free port: {e}"), false))?;
        let (dbd_port, config) = if config.accounting {
            let dbd_port = fsutil::free_port(&[ctld_port, slurmd_port]).map_err(|e| (format!("free port: {e}"), false))?;
            let mut c = config.clone();
            c.extra_slurm_conf.extend([
                "AccountingStorageType=accounting_storage/slurmdbd".to_string(),
                "AccountingStorageHost=127.0.0.1".to_string(),
                format!("AccountingStoragePort={dbd_port}"),
            ]);
            (dbd_port, std::borrow::Cow::Owned(c))
        } else {
            (0, std::borrow::Cow::Borrowed(config))
        };
        let config = config.as_ref();
        let p = prepare(config, "gres-rs", &name, ctld_port, slurmd_port).map_err(|e| (e, false))?;
        let mut c = Cluster {
            config: config.clone(),
            layout: p.layout,
            name,
            ctld_port,
            slurmd_port,
            fake_gpus: p.fake_gpus,
            our_dir: p.our_dir,
            plugin_dir_setting: p.plugin_dir_setting,
            ld_library_path: p.ld_library_path,
            munged: None,
            database: None,
            slurmdbd: None,
            dbd_port,
            slurmctld: None,
            slurmd: None,
            node_daemons: Vec::new(),
            net: None,
            stopped: false,
            ns_pins: Vec::new(),
            _guard: None,
        };
        let booted = if munged_only { c.boot_munged(Instant::now() + config.start_timeout) } else { c.boot() };
        match booted {
            Ok(()) => {
                c._guard = guard.take();
                Ok(c)
            }
            Err(e) => {
                let logs = c.log_tails(40);
                let clash = logs.contains("Address already in use");
                let keep = keep_dirs();
                let msg = format!("{e}\ncluster dir: {}{}\n{logs}", c.layout.root.display(), if keep { " (kept)" } else { "" });
                c.stop();
                Err((msg, clash))
            }
        }
    }

    fn spawn_daemon(&self, what: &str, mut cmd: Command) -> Result<Child, String> {
        let out = fs::File::create(self.layout.log.join(format!("{what}.stdout"))).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        cmd.spawn().map_err(|e| format!("spawning {what} ({}): {e}", process::describe(&cmd)))
    }

    fn boot(&mut self) -> Result<(), String> {
        let start = Instant::now();
        let deadline = start + self.config.start_timeout;
        self.boot_munged(deadline)?;
        self.boot_slurm(start, deadline)
    }

    /// munged, up to its socket answering.
    fn boot_munged(&mut self, deadline: Instant) -> Result<(), String> {
        // --- munged, as the munge user, own key + socket
        let munge_ids = match &self.config.chroot {
            Some(r) => r.user_ids("munge"),
            None => fsutil::user_ids("munge"),
        };
        let (muid, mgid) = munge_ids.ok_or("no munge user")?;
        let m = &self.layout.munge;
        fs::create_dir_all(m).map_err(|e| e.to_string())?;
        let key = m.join("munge.key");
        fs::write(&key, fsutil::random_bytes(1024).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
            fs::set_permissions(m, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
            std::os::unix::fs::chown(&key, Some(muid), Some(mgid)).map_err(|e| e.to_string())?;
            std::os::unix::fs::chown(m, Some(muid), Some(mgid)).map_err(|e| e.to_string())?;
        }
        let mut cmd = self.daemon_cmd_at("munged", Some("munge"), Place::Host);
        cmd.arg("--foreground")
            .arg(format!("--socket={}", self.layout.munge_socket().display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--pid-file={}", m.join("munged.pid").display()))
            .arg(format!("--log-file={}", m.join("munged.log").display()))
            .arg(format!("--seed-file={}", m.join("munged.seed").display()))
            .arg("--num-threads=2");
        self.munged = Some(self.spawn_daemon("munged", cmd)?);
        loop {
            if UnixStream::connect(self.layout.munge_socket()).is_ok() {
                break;
            }
            self.check_alive(Daemon::Munged)?;
            if Instant::now() > deadline {
                return Err("munged did not create its socket in time".into());
            }
            thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// The accounting database, then slurmdbd up to its port answering.
    fn boot_slurmdbd(&mut self, deadline: Instant) -> Result<(), String> {
        let db_port = fsutil::free_port(&[self.ctld_port, self.slurmd_port, self.dbd_port]).map_err(|e| format!("free port: {e}"))?;
        self.database = Some(accounting::Database::start(&self.layout.root.join("db"), db_port, deadline)?);
        let client_lib = accounting::client_library_dir(&self.layout.root)?;
        let conf = self.layout.etc.join("slurmdbd.conf");
        let text = accounting::slurmdbd_conf(self.dbd_port, db_port, &self.layout.munge_socket(), &self.layout.log, &self.layout.run);
        // slurmdbd wants its file the SlurmUser's (root) and private.
        fsutil::write_file(&conf, &text, 0o600).map_err(|e| format!("writing {}: {e}", conf.display()))?;
        let mut cmd = self.daemon_cmd("slurmdbd", None);
        cmd.arg("-D").env("LD_LIBRARY_PATH", &client_lib);
        self.slurmdbd = Some(self.spawn_daemon("slurmdbd", cmd)?);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.dbd_port)).is_ok() {
                return Ok(());
            }
            if let Some(Ok(Some(st))) = self.slurmdbd.as_mut().map(|c| c.try_wait()) {
                return Err(format!("slurmdbd exited early: {st}"));
            }
            if Instant::now() > deadline {
                return Err("slurmdbd did not open its port in time".into());
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// slurmctld and slurmd, up to the node's state (and the proof of
    /// loading).
    fn boot_slurm(&mut self, start: Instant, deadline: Instant) -> Result<(), String> {
        // --- the private network of several nodes
        if self.config.is_multi() {
            self.net = Some(netns::Network::create(self.config.nodes.len())?);
        }

        // --- the accounting database and slurmdbd
        if self.config.accounting {
            self.boot_slurmdbd(deadline)?;
        }

        // --- slurmctld
        let mut cmd = self.daemon_cmd("slurmctld", None);
        cmd.arg("-D").arg("-i");
        self.slurmctld = Some(self.spawn_daemon("slurmctld", cmd)?);

        // --- slurmd (one per node)
        let places: Vec<(String, Place)> = if self.config.is_multi() {
            self.config.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), Place::Node(i))).collect()
        } else {
            vec![(self.config.node_name.clone(), Place::Hub)]
        };
        for (name, place) in places {
            let mut cmd = self.daemon_cmd_at("slurmd", None, place);
            cmd.arg("-D").arg("-N").arg(&name).args(&self.config.slurmd_args);
            for (k, v) in &self.config.slurmd_env {
                cmd.env(k, v);
            }
            if let Some(ld) = &self.ld_library_path {
                cmd.env("LD_LIBRARY_PATH", ld);
            }
            cmd = with_mig_minors(cmd, &self.config);
            if self.config.is_multi() {
                let child = self.spawn_daemon(&format!("slurmd-{name}"), cmd)?;
                self.node_daemons.push((name, child));
            } else {
                self.slurmd = Some(self.spawn_daemon("slurmd", cmd)?);
            }
        }

        // --- wait for the nodes
        let names = self.config.node_names();
        let mut last_state = String::new();
        loop {
            self.check_alive(Daemon::Slurmctld)?;
            self.check_alive(Daemon::Slurmd)?;
            let out = self.scontrol(&["-o", "show", "node", &names.join(",")]);
            if !out.ok() {
                last_state = format!("scontrol failed: {out}");
            }
            if out.ok() {
                last_state = out.stdout.trim().to_string();
                let states: Vec<String> = out.stdout.lines().filter_map(|l| field(l, "State")).collect();
                let up = |state: &String| state == "IDLE" || (!self.config.wait_idle && !state.contains("NOT_RESPONDING") && !state.starts_with("UNKNOWN"));
                if states.len() == names.len() && states.iter().all(up) {
                    break;
                }
                if let Some(state) = states
                    .iter()
                    .find(|state| state.contains("DRAIN") || state.contains("INVALID") || state.starts_with("DOWN") && !state.contains("NOT_RESPONDING"))
                {
                    if self.config.wait_idle {
                        return Err(format!("node went {state}: {last_state}"));
                    }
                    break;
                }
            }
            if Instant::now() > deadline {
                return Err(format!("nodes not IDLE after {:?}; last: {last_state}", self.config.start_timeout));
            }
            thread::sleep(Duration::from_millis(100));
        }
        if self.config.chroot.is_some() {
            self.pin_namespaces();
        }
        if self.config.verify_ours_loaded && self.our_dir.is_some() {
            let names = self.expected_gres_plugins();
            let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
            for node in self.node_names_running() {
                self.check_ours_loaded_on(&node, &names)?;
            }
            let names = self.ctld_expected_gres_plugins();
            let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
            self.check_ours_loaded_in(Daemon::Slurmctld, &names)?;
        }
        eprintln!(
            "harness: cluster {} up in {:.1?} ({}; ports {}/{}; dir {})",
            self.name,
            start.elapsed(),
            self.config.plugins.label(),
            self.ctld_port,
            self.slurmd_port,
            self.layout.root.display()
        );
        Ok(())
    }

    /// Starts slurmctld again after [`Cluster::stop_slurmctld`]: the same
    /// command and configuration (its state read back from
    /// `StateSaveLocation`), its output in `slurmctld-restart.stdout`; waits
    /// until it answers `scontrol ping` (the config's start timeout).
    pub fn start_slurmctld(&mut self) -> Result<(), String> {
        if self.pid(Daemon::Slurmctld).is_some() {
            return Err("slurmctld is running".into());
        }
        let mut cmd = self.daemon_cmd("slurmctld", None);
        cmd.arg("-D").arg("-i");
        self.slurmctld = Some(self.spawn_daemon("slurmctld-restart", cmd)?);
        let deadline = Instant::now() + self.config.start_timeout;
        loop {
            self.check_alive(Daemon::Slurmctld)?;
            let out = self.scontrol(&["ping"]);
            if out.ok() && out.stdout.contains("is UP") {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("slurmctld does not answer after its restart: {out}"));
            }
            thread::sleep(Duration::from_millis(100));
        }
        if self.config.chroot.is_some() {
            self.pin_namespaces();
        }
        Ok(())
    }

    fn check_alive(&mut self, d: Daemon) -> Result<(), String> {
        let c = match d {
            Daemon::Munged => self.munged.as_mut(),
            Daemon::Slurmctld => self.slurmctld.as_mut(),
            Daemon::Slurmd => self.slurmd.as_mut(),
        };
        if let Some(Ok(Some(st))) = c.map(|c| c.try_wait()) {
            return Err(format!("{d:?} exited early: {st}"));
        }
        if d == Daemon::Slurmd {
            for (n, c) in self.node_daemons.iter_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    return Err(format!("slurmd of {n} exited early: {st}"));
                }
            }
        }
        Ok(())
    }

    /// Opens the mount namespaces of the running chroot daemons (see
    /// `ns_pins`); those still in this process's namespace (not yet past
    /// `unshare`) are not pinned.
    pub(super) fn pin_namespaces(&mut self) {
        let own = chroot::mount_namespace(std::process::id());
        for d in [Daemon::Slurmd, Daemon::Slurmctld] {
            let Some(pid) = self.pid(d) else { continue };
            if chroot::mount_namespace(pid).is_some_and(|ns| Some(ns) != own) {
                if let Ok(f) = fs::File::open(format!("/proc/{pid}/ns/mnt")) {
                    self.ns_pins.push(f);
                }
            }
        }
    }
}
