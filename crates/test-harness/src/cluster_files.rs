//! A cluster's files, written before its daemons start: fake GPUs, our
//! plugins installed, slurm.conf, gres.conf and the other configuration
//! files.

use crate::config::{ClusterConfig, PluginSet};
use crate::host::host_version;
use crate::install::install_ours_from;
use crate::layout::{keep_dirs, Layout};
use crate::paths::locate_our_library;
use crate::{envdump, fsutil, netns, nvml_stub, quirks};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A symbolic link in `dir` to each file of the stock plugin directory
/// that `dir` lacks (by its path as the daemons see it: in a chroot the
/// chroot's).
fn link_stock_files(c: &ClusterConfig, dir: &Path) -> Result<(), String> {
    let stock = c.stock_plugin_dir();
    let listed = c.chroot.as_ref().map(|r| r.host_path(&stock)).unwrap_or_else(|| stock.clone());
    let entries = fs::read_dir(&listed).map_err(|e| format!("listing {}: {e}", listed.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if dir.join(&name).symlink_metadata().is_err() {
            std::os::unix::fs::symlink(stock.join(&name), dir.join(&name))
                .map_err(|e| format!("linking {} in {}: {e}", name.to_string_lossy(), dir.display()))?;
        }
    }
    Ok(())
}

/// Files prepared for a cluster: config written, fake GPUs made, our
/// plugins installed. Shared by `Cluster::start` and `Cluster::slurmd_g`.
pub(crate) struct Prepared {
    pub(crate) layout: Layout,
    pub(crate) fake_gpus: Vec<PathBuf>,
    pub(crate) plugin_dir_setting: String,
    pub(crate) our_dir: Option<PathBuf>,
    pub(crate) ld_library_path: Option<PathBuf>,
}

pub(crate) fn prepare(config: &ClusterConfig, prefix: &str, name: &str, ctld_port: u16, slurmd_port: u16) -> Result<Prepared, String> {
    let layout = Layout::create(prefix).map_err(|e| format!("creating temp dir: {e}"))?;
    let r = prepare_in(&layout, config, name, ctld_port, slurmd_port);
    match r {
        Ok((fake_gpus, plugin_dir_setting, our_dir, ld)) => Ok(Prepared { layout, fake_gpus, plugin_dir_setting, our_dir, ld_library_path: ld }),
        Err(e) => {
            if keep_dirs() {
                let _ = fs::remove_file(layout.root.join(fsutil::IN_USE_MARKER));
            } else {
                let _ = fs::remove_dir_all(&layout.root);
            }
            Err(e)
        }
    }
}

type PrepParts = (Vec<PathBuf>, String, Option<PathBuf>, Option<PathBuf>);

fn prepare_in(l: &Layout, c: &ClusterConfig, name: &str, ctld_port: u16, slurmd_port: u16) -> Result<PrepParts, String> {
    let e = |what: &str| {
        let what = what.to_string();
        move |err: io::Error| format!("{what}: {err}")
    };
    let mut fake_gpus = Vec::new();
    if c.is_multi() {
        for n in &c.nodes {
            fake_gpus.extend(fsutil::make_fake_gpu_nodes(&l.dev.join(&n.name), n.fake_gpus).map_err(e("creating fake GPU device nodes"))?);
            fs::create_dir_all(l.spool.join(&n.name)).map_err(e("creating a node's spool dir"))?;
        }
    } else {
        fake_gpus = fsutil::make_fake_gpu_nodes(&l.dev, c.fake_gpus).map_err(e("creating fake GPU device nodes"))?;
    }

    // Our plugins, installed under the names slurmd loads (temp + rename).
    let mut stock = c.stock_plugin_dir().to_string_lossy().into_owned();
    if !c.extra_stock_plugins.is_empty() {
        let extra = l.root.join("stock-extra");
        fs::create_dir_all(&extra).map_err(e("creating stock-extra"))?;
        for f in &c.extra_stock_plugins {
            let name = f.file_name().ok_or_else(|| format!("{}: not a file", f.display()))?;
            fs::copy(f, extra.join(name)).map_err(e(&format!("copying {}", f.display())))?;
        }
        stock = format!("{}:{stock}", extra.display());
    }
    let ours = c.plugins.ours();
    let (plugin_dir_setting, our_dir) = if ours.is_empty() {
        (stock, None)
    } else if let PluginSet::Installed(dir) = &c.plugins {
        (format!("{}:{stock}", dir.display()), Some(dir.clone()))
    } else if let PluginSet::Diverted(dir) = &c.plugins {
        (stock, Some(dir.clone()))
    } else {
        let names: Vec<&str> = ours.iter().map(|s| s.as_str()).collect();
        // In a chroot, the default build and the plugin files built into
        // the harness are the host release's: our build for the chroot's
        // release instead (the test-hooks one when the config asked for a
        // build of its own), or the OursUnavailable panic.
        let release_build = match &c.chroot {
            Some(root) if c.plugin_files_dir.is_none() => Some(crate::builds::our_build_for_chroot(root, c.plugin_build_dir.is_some())),
            _ => None,
        };
        let c = &match release_build {
            Some(b) => b.apply(c.clone()),
            None => c.clone(),
        };
        let built = match &c.plugin_build_dir {
            Some(d) => d.clone(),
            None => locate_our_library()?,
        };
        install_ours_from(&built, c.plugin_files_dir.as_deref(), &names, &l.plugins)?;
        if c.single_plugin_dir {
            if !c.extra_stock_plugins.is_empty() {
                return Err("single_plugin_dir with extra_stock_plugins: not supported".into());
            }
            link_stock_files(c, &l.plugins)?;
            (l.plugins.display().to_string(), Some(l.plugins.clone()))
        } else {
            (format!("{}:{stock}", l.plugins.display()), Some(l.plugins.clone()))
        }
    };

    let ld = if c.nvml_stub { Some(nvml_stub::build(&l.root.join("nvml-stub"))?) } else { None };

    // dump-env helper used by jobs, prolog and epilog.
    fsutil::write_file(&l.dump_env_script(), &envdump::dump_env_script_text(&l.dumps), 0o755).map_err(e("writing dump-env"))?;

    let node = &c.node_name;
    let mut prolog = c.prolog.clone();
    let mut epilog = c.epilog.clone();
    if c.dump_prolog_epilog_env {
        let d = l.dump_env_script();
        prolog.get_or_insert_with(|| format!("#!/bin/sh\n{} prolog >/dev/null 2>&1\nexit 0\n", d.display()));
        epilog.get_or_insert_with(|| format!("#!/bin/sh\n{} epilog >/dev/null 2>&1\nexit 0\n", d.display()));
    }
    let mut extra = Vec::new();
    if let Some(p) = &prolog {
        let path = l.etc.join("prolog.sh");
        fsutil::write_file(&path, &l.subst(p, node), 0o755).map_err(e("writing prolog"))?;
        extra.push(format!("Prolog={}", path.display()));
    }
    if let Some(p) = &epilog {
        let path = l.etc.join("epilog.sh");
        fsutil::write_file(&path, &l.subst(p, node), 0o755).map_err(e("writing epilog"))?;
        extra.push(format!("Epilog={}", path.display()));
    }

    let host = fsutil::short_hostname();
    let mut conf = String::new();
    let mut line = |s: String| {
        conf.push_str(&s);
        conf.push('\n');
    };
    line("# written by the slurm-gpu-gres test harness".into());
    line(format!("ClusterName={name}"));
    let ctld_addr = if c.is_multi() { netns::HUB_ADDR } else { "127.0.0.1" };
    line(format!("SlurmctldHost={host}({ctld_addr})"));
    line(format!("SlurmctldPort={ctld_port}"));
    line(format!("SlurmdPort={slurmd_port}"));
    line("AuthType=auth/munge".into());
    line("CredType=cred/munge".into());
    line(format!("AuthInfo=socket={}", l.munge_socket().display()));
    if c.accounting {
        // The munged socket of the connections to slurmdbd (they do not
        // take AuthInfo's).
        line(format!("AccountingStoragePass={}", l.munge_socket().display()));
    }
    line("SlurmUser=root".into());
    line("SlurmdUser=root".into());
    line(format!("StateSaveLocation={}", l.state.display()));
    // Several nodes: each its own spool dir, pid file and log (`%n`: the
    // node's name).
    let per_node = |dir: &Path, file: &str| if c.is_multi() { dir.join(file.replace('*', "-%n")) } else { dir.join(file.replace('*', "")) };
    line(format!("SlurmdSpoolDir={}", if c.is_multi() { l.spool.join("%n") } else { l.spool.clone() }.display()));
    line(format!("SlurmctldPidFile={}", l.run.join("slurmctld.pid").display()));
    line(format!("SlurmdPidFile={}", per_node(&l.run, "slurmd*.pid").display()));
    line(format!("SlurmctldLogFile={}", l.log.join("slurmctld.log").display()));
    line(format!("SlurmdLogFile={}", per_node(&l.log, "slurmd*.log").display()));
    line(format!("SlurmctldDebug={}", c.slurmctld_debug));
    line(format!("SlurmdDebug={}", c.slurmd_debug));
    if c.debug_gres {
        line("DebugFlags=Gres".into());
    }
    line(format!("PluginDir={plugin_dir_setting}"));
    line(format!("ProctrackType={}", c.proctrack));
    line("TaskPlugin=task/none".into());
    line("SelectType=select/cons_tres".into());
    line(format!("SelectTypeParameters={}", c.select_type_parameters));
    line(format!("GresTypes={}", c.gres_types));
    line("MpiDefault=none".into());
    line("SwitchType=switch/none".into());
    // Defaults a test may set otherwise in `extra_slurm_conf` (so that
    // each key is written once).
    let sets = |key: &str| extra.iter().chain(c.extra_slurm_conf.iter()).any(|x| x.split_once('=').is_some_and(|(k, _)| k.eq_ignore_ascii_case(key)));
    if !sets("JobAcctGatherType") {
        line("JobAcctGatherType=jobacct_gather/none".into());
    }
    if !sets("AccountingStorageType") {
        line("AccountingStorageType=accounting_storage/none".into());
    }
    line("JobCompType=jobcomp/none".into());
    line("SchedulerType=sched/backfill".into());
    let release = c.chroot.as_ref().and_then(|r| r.slurm_version().ok()).or_else(host_version).unwrap_or_default();
    if quirks::behaviour_of(&release).pending_jobs_wait_for_backfill && !sets("SchedulerParameters") {
        // Pending jobs start only when backfill runs (StockQuirks field):
        // run it every second, not every 30.
        line("SchedulerParameters=bf_interval=1".into());
    }
    line("ReturnToService=2".into());
    if !sets("SlurmdParameters") {
        line("SlurmdParameters=config_overrides".into());
    }
    line("MailProg=/bin/true".into());
    line("InactiveLimit=0".into());
    line("KillWait=3".into());
    line("MinJobAge=300".into());
    line("SlurmdTimeout=60".into());
    for x in extra.iter().chain(c.extra_slurm_conf.iter()) {
        line(l.subst(x, node));
    }
    let node_line = |name: &str, hostname: &str, addr: &str, gres: Option<&String>| {
        let gres = gres.map(|g| format!(" Gres={g}")).unwrap_or_default();
        format!(
            "NodeName={name} NodeHostname={hostname} NodeAddr={addr} CPUs={} Boards={} SocketsPerBoard={} CoresPerSocket={} ThreadsPerCore={} RealMemory={}{gres} State=UNKNOWN {}",
            c.cpus,
            c.boards,
            c.sockets_per_board,
            c.cores_per_socket,
            c.threads_per_core,
            c.real_memory_mb,
            l.subst(&c.extra_node_conf, name)
        )
    };
    if c.is_multi() {
        for (i, n) in c.nodes.iter().enumerate() {
            line(node_line(&n.name, &n.name, &netns::node_addr(i), n.gres.as_ref()));
        }
    } else {
        line(node_line(node, &host, "127.0.0.1", c.node_gres.as_ref()));
    }
    line("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP".into());
    fsutil::write_file(&l.slurm_conf(), &conf, 0o644).map_err(e("writing slurm.conf"))?;
    fsutil::write_file(&l.etc.join("gres.conf"), &l.subst(&c.gres_conf, node), 0o644).map_err(e("writing gres.conf"))?;
    if let Some(cg) = &c.cgroup_conf {
        fsutil::write_file(&l.etc.join("cgroup.conf"), &l.subst(cg, node), 0o644).map_err(e("writing cgroup.conf"))?;
    }
    if let Some(f) = &c.fake_gpus_conf {
        fsutil::write_file(&l.etc.join("fake_gpus.conf"), &l.subst(f, node), 0o644).map_err(e("writing fake_gpus.conf"))?;
    }
    if let Some(target) = &c.fake_gpus_link {
        std::os::unix::fs::symlink(l.subst(target, node), l.etc.join("fake_gpus.conf")).map_err(e("linking fake_gpus.conf"))?;
    }
    Ok((fake_gpus, plugin_dir_setting, our_dir, ld))
}
