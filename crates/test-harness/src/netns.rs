//! Private networks for multi-node clusters: one slurmctld and several
//! slurmd on this machine, each slurmd in a network namespace of its own.
//!
//! Debian's slurmd is built without multiple-slurmd support, so each node
//! needs its own address (and port space).  A [`Network`] is made of
//! namespaces that exist only while processes hold them: a *hub*
//! namespace (`unshare --net` running `sleep`) holding a bridge with the
//! subnet's first address, where slurmctld and the client commands run,
//! and one namespace per node, joined to the bridge by a veth pair whose
//! node end is its `eth0`.  Nothing is added to the host's own network
//! namespace, nothing is mounted (no `ip netns add`: its names are bind
//! mounts under `/run/netns`), and no traffic leaves the namespaces: when
//! the holders and every process inside have ended, the kernel frees the
//! namespaces, and with them the bridge and the veth pairs.
//!
//! Daemons enter a namespace with `nsenter --net=/proc/<holder>/ns/net`
//! (not `ip netns exec`, which remounts `/sys` and so hides
//! `/sys/fs/cgroup`: slurmd 22.05 then refuses to start).  A node's slurmd
//! is started as `nsenter --net=... -- unshare --uts --mount -- sh -c
//! '<set the host name>; exec "$@"'` around its usual command (which in a
//! chroot unshares its own mount namespace): every step execs, so the PID
//! the harness holds is slurmd's.

use crate::process;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The private subnet of every [`Network`] (each lives in namespaces of
/// its own, so two clusters' subnets never meet): `10.77.0.0/24`.
pub const SUBNET_PREFIX: &str = "10.77.0";

/// The hub's address (the bridge in the hub namespace): slurmctld's.
pub const HUB_ADDR: &str = "10.77.0.1";

/// The address of node `i` (0-based): `10.77.0.(11 + i)`.
pub fn node_addr(i: usize) -> String {
    format!("{SUBNET_PREFIX}.{}", 11 + i)
}

/// The host tools a [`Network`] needs (iproute2, util-linux).
pub const TOOLS: [&str; 4] = ["ip", "nsenter", "unshare", "setpriv"];

/// A running private network: the hub and one namespace per node.
pub struct Network {
    hub: Child,
    nodes: Vec<Child>,
    /// Inodes of the namespaces (hub first), for finding every process
    /// inside them.
    inodes: Vec<u64>,
}

/// A holder: `setpriv --pdeathsig KILL unshare --net sleep infinity` (it
/// also ends if the test process dies).
fn holder() -> Result<Child, String> {
    let mut cmd = Command::new(crate::tool("setpriv"));
    cmd.args(["--pdeathsig", "KILL"]).arg(crate::tool("unshare")).args(["--net", "--"]).arg(crate::tool("sleep")).arg("infinity");
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    cmd.spawn().map_err(|e| format!("starting a network namespace holder: {e}"))
}

/// The network namespace inode of `pid`.
pub fn net_namespace(pid: u32) -> Option<u64> {
    fs::metadata(format!("/proc/{pid}/ns/net")).ok().map(|m| m.ino())
}

/// Runs `script` with `/bin/sh` inside the network namespace of `pid`.
fn in_ns(pid: u32, script: &str) -> Result<(), String> {
    let out = Command::new(crate::tool("nsenter"))
        .arg(format!("--net=/proc/{pid}/ns/net"))
        .args(["--", "/bin/sh", "-ec", script])
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .map_err(|e| format!("nsenter: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("in network namespace of {pid}: `{script}` failed: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl Network {
    /// Makes the hub and `nodes` node namespaces and wires them.
    pub fn create(nodes: usize) -> Result<Network, String> {
        let hub = holder()?;
        let mut net = Network { inodes: Vec::new(), hub, nodes: Vec::new() };
        for _ in 0..nodes {
            net.nodes.push(holder()?);
        }
        // `unshare` execs `sleep` once the namespace exists: wait for the
        // holders' namespaces to differ from ours.
        let own = net_namespace(std::process::id());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let all: Vec<Option<u64>> = net.pids().iter().map(|p| net_namespace(*p)).collect();
            if all.iter().all(|ns| ns.is_some() && *ns != own) {
                net.inodes = all.into_iter().flatten().collect();
                break;
            }
            if std::time::Instant::now() > deadline {
                return Err("network namespace holders did not start".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut hub = format!("ip link set lo up\nip link add br0 type bridge\nip addr add {HUB_ADDR}/24 dev br0\nip link set br0 up\n");
        for (i, n) in net.nodes.iter().enumerate() {
            hub.push_str(&format!("ip link add vn{i} type veth peer name eth0 netns {}\nip link set vn{i} master br0 up\n", n.id()));
        }
        in_ns(net.hub.id(), &hub)?;
        for (i, n) in net.nodes.iter().enumerate() {
            in_ns(n.id(), &format!("ip link set lo up\nip addr add {}/24 dev eth0\nip link set eth0 up\n", node_addr(i)))?;
        }
        Ok(net)
    }

    /// The holders' PIDs, the hub's first.
    pub fn pids(&self) -> Vec<u32> {
        std::iter::once(self.hub.id()).chain(self.nodes.iter().map(|c| c.id())).collect()
    }

    /// The hub holder's PID (its `/proc/<pid>/ns/net` is the hub).
    pub fn hub_pid(&self) -> u32 {
        self.hub.id()
    }

    /// Node `i`'s holder PID.
    pub fn node_pid(&self, i: usize) -> u32 {
        self.nodes[i].id()
    }

    /// Live processes (other than the holders) inside any of the
    /// network's namespaces: its daemons and everything they started.
    pub fn pids_inside(&self) -> Vec<u32> {
        let holders = self.pids();
        let Ok(rd) = fs::read_dir("/proc") else { return Vec::new() };
        rd.flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
            .filter(|p| !holders.contains(p) && process::pid_alive(*p))
            .filter(|p| net_namespace(*p).is_some_and(|ns| self.inodes.contains(&ns)))
            .collect()
    }

    /// `inner` (program and arguments only: call before setting its
    /// environment) run inside the hub's network namespace.
    pub fn in_hub(&self, inner: &Command) -> Command {
        let mut cmd = Command::new(crate::tool("nsenter"));
        cmd.arg(format!("--net=/proc/{}/ns/net", self.hub.id())).arg("--");
        append(&mut cmd, inner);
        cmd
    }

    /// `inner` run as node `i` named `name`: in its network namespace, in
    /// a new UTS namespace with host name `name`, and (when `mount`) a new
    /// private mount namespace.
    pub fn on_node(&self, i: usize, name: &str, mount: bool, inner: &Command) -> Command {
        let mut cmd = Command::new(crate::tool("nsenter"));
        cmd.arg(format!("--net=/proc/{}/ns/net", self.nodes[i].id())).arg("--").arg(crate::tool("unshare")).arg("--uts");
        if mount {
            cmd.args(["--mount", "--propagation", "private"]);
        }
        cmd.args(["--", "/bin/sh", "-c", "printf '%s\\n' \"$0\" >/proc/sys/kernel/hostname && exec \"$@\"", name]);
        append(&mut cmd, inner);
        cmd
    }

    /// Ends every process inside (TERM, then KILL), then the holders: the
    /// namespaces, bridge and veth pairs go with them.  Idempotent.
    pub fn stop(&mut self) {
        for _ in 0..3 {
            let pids = self.pids_inside();
            if pids.is_empty() {
                break;
            }
            eprintln!("harness: stopping processes left in the cluster's network namespaces: {pids:?}");
            for p in process::process_refs(&pids) {
                process::terminate_process(p, Duration::from_secs(3));
            }
        }
        for c in std::iter::once(&mut self.hub).chain(self.nodes.iter_mut()) {
            process::terminate_child(c, "netns holder", Duration::from_secs(2));
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Appends `inner`'s program and arguments to `cmd`.
fn append(cmd: &mut Command, inner: &Command) {
    cmd.arg(inner.get_program());
    cmd.args(inner.get_args().map(OsString::from));
}
