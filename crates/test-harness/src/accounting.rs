//! The database of a test cluster's job accounting: a MariaDB server
//! (Debian's `mariadb-server`; its own service is never used) with a data
//! directory of the cluster's, on a free loopback port, stopped by PID with
//! the cluster.  The release's slurmdbd, which the cluster starts
//! ([`crate::ClusterConfig::accounting`]), stores into it over TCP as the
//! user [`USER`], through the host's MariaDB client library
//! ([`client_library_dir`]).

use crate::{fsutil, process, tool};
use std::fs;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The database user slurmdbd connects as (`StorageUser`), and its
/// password (`StoragePass`).
pub const USER: &str = "slurm";
pub const PASSWORD: &str = "slurm";

/// The server programs, from Debian's `mariadb-server`.
const PROGRAMS: [&str; 3] = [SERVER, INSTALL_DB, CLIENT];
const SERVER: &str = "/usr/sbin/mariadbd";
const INSTALL_DB: &str = "/usr/bin/mariadb-install-db";
const CLIENT: &str = "/usr/bin/mariadb";

/// Why the host cannot run a database server for a test, if it cannot.
pub fn missing() -> Option<String> {
    PROGRAMS.iter().find(|p| !Path::new(p).exists()).map(|p| format!("{p} not found (Debian's mariadb-server, which tests/setup-debian.sh installs)"))
}

/// The host's MariaDB client library (Debian 12's Connector/C 3.3), copied
/// into `<cluster>/dblib`, the directory slurmdbd's `LD_LIBRARY_PATH`
/// names: the client library of Debian 13 and unstable (Connector/C 3.4)
/// fails Slurm's first query of the database (`select @var :=
/// concat('')`, error 5027 "Number of columns in result (=1) set exceeds
/// maximum allowed number of columns (=0)", seen with 24.11.5's and
/// 26.05.5's slurmdbd against MariaDB 10.11 and 11.8 alike), while the
/// `mariadb` client of the same library runs that query.  The library
/// keeps its ABI (`libmariadb.so.3`) across them.
pub fn client_library_dir(cluster_root: &Path) -> Result<PathBuf, String> {
    let lib = ["/usr/lib/x86_64-linux-gnu/libmariadb.so.3", "/usr/lib/aarch64-linux-gnu/libmariadb.so.3"]
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .ok_or("no libmariadb.so.3 on the host (Debian's libmariadb3, which mariadb-server brings)")?;
    let dir = cluster_root.join("dblib");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    fs::copy(lib, dir.join("libmariadb.so.3")).map_err(|e| format!("copying {}: {e}", lib.display()))?;
    Ok(dir)
}

/// A running server.
pub struct Database {
    child: Option<Child>,
    /// The TCP port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
}

impl Database {
    /// A new server with its data in `dir` (made here), listening on
    /// 127.0.0.1:`port` only, with [`USER`] allowed from there; started
    /// and ready by `deadline`.
    pub fn start(dir: &Path, port: u16, deadline: Instant) -> Result<Database, String> {
        if let Some(m) = missing() {
            return Err(m);
        }
        let data = dir.join("data");
        fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
        let out = Command::new(INSTALL_DB)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--user=root", "--auth-root-authentication-method=socket", "--skip-test-db"])
            .output()
            .map_err(|e| format!("{INSTALL_DB}: {e}"))?;
        if !out.status.success() {
            return Err(format!("{INSTALL_DB} failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
        }
        let socket = dir.join("mysqld.sock");
        let log = fs::File::create(dir.join("mariadbd.stdout")).map_err(|e| e.to_string())?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        // setpriv --pdeathsig: the server dies with the test process
        // even if that is killed outright.
        let mut cmd = Command::new(tool("setpriv"));
        cmd.args(["--pdeathsig", "TERM", SERVER, "--no-defaults"])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.join("mariadbd.pid").display()))
            .arg(format!("--log-error={}", dir.join("mariadbd.err").display()))
            .arg(format!("--port={port}"))
            .args(["--bind-address=127.0.0.1", "--skip-name-resolve", "--user=root", "--skip-log-bin"])
            // Small: a test stores a few jobs.
            .args(["--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=0"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        let child = cmd.spawn().map_err(|e| format!("{SERVER}: {e}"))?;
        let mut db = Database { child: Some(child), port, dir: dir.to_path_buf() };
        loop {
            if UnixStream::connect(&socket).is_ok() {
                break;
            }
            if let Some(c) = db.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    return Err(format!("{SERVER} exited early ({st}):\n{}", db.log_tail(20)));
                }
            }
            if Instant::now() > deadline {
                return Err(format!("{SERVER} did not open its socket in time:\n{}", db.log_tail(20)));
            }
            thread::sleep(Duration::from_millis(100));
        }
        let grant = format!("CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; GRANT ALL ON *.* TO '{USER}'@'127.0.0.1';");
        let out = Command::new(CLIENT)
            .arg("--no-defaults")
            .arg(format!("--socket={}", socket.display()))
            .args(["-u", "root", "-e", &grant])
            .output()
            .map_err(|e| format!("{CLIENT}: {e}"))?;
        if !out.status.success() {
            return Err(format!("creating the database user failed:\n{}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(db)
    }

    /// The last `n` lines of the server's error log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = fsutil::read_lossy(&self.dir.join("mariadbd.err"));
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Stop the server (TERM, then KILL after a grace period); its files
    /// stay for the cluster's directory to take.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            process::terminate_child(&mut c, "mariadbd", Duration::from_secs(20));
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        self.stop();
    }
}

/// slurmdbd.conf of a cluster: its daemon on 127.0.0.1:`dbd_port`, the
/// cluster's munged, the database on 127.0.0.1:`db_port`.
pub fn slurmdbd_conf(dbd_port: u16, db_port: u16, munge_socket: &Path, log: &Path, run: &Path) -> String {
    format!(
        "# written by the slurm-gpu-gres test harness\n\
         AuthType=auth/munge\n\
         AuthInfo=socket={}\n\
         DbdHost=localhost\n\
         DbdAddr=127.0.0.1\n\
         DbdPort={dbd_port}\n\
         SlurmUser=root\n\
         DebugLevel=info\n\
         LogFile={}\n\
         PidFile={}\n\
         StorageType=accounting_storage/mysql\n\
         StorageHost=127.0.0.1\n\
         StoragePort={db_port}\n\
         StorageUser={USER}\n\
         StoragePass={PASSWORD}\n\
         StorageLoc=slurm_acct_db\n",
        munge_socket.display(),
        log.join("slurmdbd.log").display(),
        run.join("slurmdbd.pid").display()
    )
}
