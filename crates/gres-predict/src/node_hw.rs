//! A node's CPUs as slurm.conf gives them (sockets, cores, threads,
//! Slurm's defaults and corrections), and the map between slurmd's
//! abstract core ids and the machine's CPU ids.

use crate::problem::{Problem, Severity};
use crate::slurm_conf::NodeLine;

/// A node's CPU layout as slurm.conf gives it (after Slurm's defaults and
/// corrections).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeHw {
    pub cpus: u32,
    pub boards: u32,
    /// Sockets of the whole node.
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
}

impl NodeHw {
    /// Cores of the whole node.
    pub fn cores(&self) -> u32 {
        self.sockets.saturating_mul(self.cores_per_socket)
    }
}

impl Default for NodeHw {
    fn default() -> Self {
        NodeHw { cpus: 1, boards: 1, sockets: 1, cores_per_socket: 1, threads_per_core: 1 }
    }
}

/// The CPU layout of a slurm.conf `NodeName` line, as Slurm's reader
/// completes it: `CPUs` (or `Procs`) defaults to sockets x cores x threads,
/// `Sockets` to `Boards` x `SocketsPerBoard` or `CPUs` / (cores x threads),
/// zero values become 1, and a `CPUs` that fits no layout is replaced.
pub fn node_hw(line: &NodeLine) -> (NodeHw, Vec<Problem>) {
    let mut problems = Vec::new();
    let nodes = &line.names.value;
    let mut get = |key: &str| -> Option<u32> {
        let v = line.get(key)?;
        match v.value.parse::<u16>() {
            Ok(n) => Some(u32::from(n)),
            Err(_) => {
                problems.push(Problem::new(Severity::Fatal, Some(v.location.clone()), format!("{key}={} is not a number from 0 to 65535", v.value)));
                None
            }
        }
    };
    let mut hw = NodeHw::default();
    let cpus = get("CPUs").or_else(|| get("Procs"));
    let sockets = get("Sockets");
    let sockets_per_board = get("SocketsPerBoard");
    if let Some(b) = get("Boards") {
        hw.boards = b;
    }
    if let Some(c) = get("CoresPerSocket") {
        hw.cores_per_socket = c;
    }
    if let Some(t) = get("ThreadsPerCore") {
        hw.threads_per_core = t;
    }
    if let Some(c) = cpus {
        hw.cpus = c;
    }
    if let Some(s) = sockets {
        hw.sockets = s;
    }
    let fix = |problems: &mut Vec<Problem>, what: &str, value: &mut u32| {
        if *value == 0 {
            problems.push(Problem::new(Severity::Error, Some(line.location.clone()), format!("NodeNames={nodes} {what}=0 is invalid, reset to 1")));
            *value = 1;
        }
    };
    fix(&mut problems, "CoresPerSocket", &mut hw.cores_per_socket);
    fix(&mut problems, "CPUs", &mut hw.cpus);
    fix(&mut problems, "ThreadsPerCore", &mut hw.threads_per_core);
    let mut spb = sockets_per_board.unwrap_or(1);
    fix(&mut problems, "SocketsPerBoards", &mut spb);
    fix(&mut problems, "Sockets", &mut hw.sockets);
    let mut no_sockets = sockets.is_none();
    if sockets_per_board.is_some() && sockets.is_some() {
        problems.push(Problem::new(
            Severity::Error,
            Some(line.location.clone()),
            format!("NodeNames={nodes} Sockets=# and SocketsPerBoard=# is invalid , using SocketsPerBoard"),
        ));
        no_sockets = true;
    }
    fix(&mut problems, "Boards", &mut hw.boards);
    let per_socket = hw.cores_per_socket * hw.threads_per_core;
    if no_sockets {
        if sockets_per_board.is_some() {
            hw.sockets = hw.boards * spb;
        } else if cpus.is_some() && hw.cpus / per_socket > 0 && hw.cpus % per_socket == 0 {
            hw.sockets = hw.cpus / per_socket;
        } else {
            hw.sockets = hw.boards;
        }
    }
    if cpus.is_none() {
        hw.cpus = hw.sockets * per_socket;
    }
    if hw.sockets < hw.boards {
        hw.boards = 1;
    }
    if hw.cpus != hw.sockets && hw.cpus != hw.sockets * hw.cores_per_socket && hw.cpus != hw.sockets * per_socket {
        problems.push(Problem::new(
            Severity::Error,
            Some(line.location.clone()),
            format!("NodeNames={nodes} CPUs={} match no Sockets, Sockets*CoresPerSocket or Sockets*CoresPerSocket*ThreadsPerCore. Resetting CPUs.", hw.cpus),
        ));
        hw.cpus = hw.sockets * per_socket;
    }
    (hw, problems)
}

/// slurmd's conversion of gres.conf `Cores` (abstract core ids) into
/// machine CPU ids (`xcpuinfo_abs_to_mac()`), for a machine whose CPUs are
/// numbered in Slurm's abstract order (an identity block map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuMap {
    /// Cores slurmd believes the node has (sockets x cores per socket).
    pub cores: usize,
    pub threads_per_core: usize,
    /// CPUs of the machine (`block_map_size`).
    pub cpus: usize,
}

impl CpuMap {
    /// The map slurmd uses for a node configured as `conf`, running on a
    /// machine with `actual` (CPUs, cores) when known: the configured
    /// layout, unless the machine has fewer CPUs than configured and
    /// `SlurmdParameters=config_overrides` is not set.
    pub fn for_node(conf: &NodeHw, actual: Option<(u32, u32)>, config_overrides: bool) -> CpuMap {
        let (cores, threads) = match actual {
            Some((cpus, cores)) if !config_overrides && cpus < conf.cpus => {
                let cores = cores.max(1);
                (cores, (cpus / cores).max(1))
            }
            _ => (conf.cores(), conf.threads_per_core),
        };
        CpuMap { cores: cores as usize, threads_per_core: threads.max(1) as usize, cpus: actual.map_or(conf.cpus, |(cpus, _)| cpus).max(1) as usize }
    }

    /// The machine CPUs of the abstract cores in `range` (`0-3`); an error
    /// when the range names a core the node does not have.
    pub fn abs_to_mac(&self, range: &str) -> Result<String, String> {
        let abs = gres_core::model::Bitmap::from_ranges(self.cores, range).map_err(|e| e.to_string())?;
        let mut mac = gres_core::model::Bitmap::new(self.cpus);
        for core in abs.ones() {
            for thread in 0..self.threads_per_core {
                mac.set((core * self.threads_per_core + thread) % self.cpus);
            }
        }
        Ok(mac.to_ranges())
    }
}
