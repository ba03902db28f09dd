//! The directory layout of one cluster (or one `slurmd -G` run), and
//! whether it is kept (`GRES_RS_KEEP`).

use crate::fsutil;
use std::fs;
use std::io;
use std::path::PathBuf;

/// Directory layout of one cluster (or one `slurmd -G` run).
#[derive(Clone, Debug)]
pub struct Layout {
    pub root: PathBuf,
    pub etc: PathBuf,
    pub log: PathBuf,
    pub run: PathBuf,
    pub spool: PathBuf,
    pub state: PathBuf,
    pub munge: PathBuf,
    pub dev: PathBuf,
    pub plugins: PathBuf,
    pub jobs: PathBuf,
    pub dumps: PathBuf,
    pub bin: PathBuf,
    pub capture: PathBuf,
}

impl Layout {
    pub(crate) fn create(prefix: &str) -> io::Result<Layout> {
        let root = fsutil::make_unique_dir(prefix)?;
        let l = Layout {
            etc: root.join("etc"),
            log: root.join("log"),
            run: root.join("run"),
            spool: root.join("spool"),
            state: root.join("state"),
            munge: root.join("munge"),
            dev: root.join("dev"),
            plugins: root.join("plugins"),
            jobs: root.join("jobs"),
            dumps: root.join("dumps"),
            bin: root.join("bin"),
            capture: root.join("capture"),
            root,
        };
        for d in [&l.etc, &l.log, &l.run, &l.spool, &l.state, &l.dev, &l.plugins, &l.jobs, &l.dumps, &l.bin, &l.capture] {
            fs::create_dir_all(d)?;
        }
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&l.jobs, fs::Permissions::from_mode(0o1777))?;
        fs::set_permissions(&l.dumps, fs::Permissions::from_mode(0o1777))?;
        Ok(l)
    }

    /// Replaces the placeholders {DIR} {DEV} {ETC} {NODE}.
    pub fn subst(&self, s: &str, node: &str) -> String {
        s.replace("{DIR}", &self.root.to_string_lossy())
            .replace("{DEV}", &self.dev.to_string_lossy())
            .replace("{ETC}", &self.etc.to_string_lossy())
            .replace("{NODE}", node)
    }

    pub fn slurm_conf(&self) -> PathBuf {
        self.etc.join("slurm.conf")
    }
    pub fn munge_socket(&self) -> PathBuf {
        self.munge.join("munge.sock")
    }
    pub fn dump_env_script(&self) -> PathBuf {
        self.bin.join("dump-env")
    }
}

pub(crate) fn keep_dirs() -> bool {
    std::env::var("GRES_RS_KEEP").map(|v| v == "1" || v.eq_ignore_ascii_case("true")).unwrap_or(false)
}
