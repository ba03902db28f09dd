//! `gres-rs`: the command-line companion of the slurm-gpu-gres plugins.
//!
//! - `gres-rs check`: the GRES table slurmd would configure for a node
//!   (the lines `slurmd -G` prints) and every problem with slurm.conf and
//!   gres.conf that slurmd would only show as a drained node or a log line.
//! - `gres-rs detect`: the GPUs NVML reports, as a table or gres.conf lines.
//! - `gres-rs install`: put the plugin files where slurmd loads them.
//! - `gres-rs status`: which plugin files the running daemons have mapped.
//!
//! Everything this tool knows about Slurm is in the library; this binary
//! only reads files, asks the host, and prints.

#![deny(unsafe_code)]

mod check;
mod detect;
mod elf;
mod generate;
mod gres_conf_index;
mod health;
mod host;
mod install;
mod installed;
mod plugin_dir;
mod render;
mod status;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Exit status: everything fine.
pub const EXIT_OK: u8 = 0;
/// Exit status: problems found (check), nothing detected (detect), a file
/// refused (install).
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit status: bad usage, or a file that cannot be read or written.
pub const EXIT_USAGE: u8 = 2;

const LONG_ABOUT: &str = "\
NAME
    gres-rs - check, detect and install Slurm GPU GRES configurations

DESCRIPTION
    gres-rs works with the memory-safe replacements of Slurm's gres/gpu,
    gres/mps, gres/shard and gpu/nvml plugins.  It reads slurm.conf and
    gres.conf exactly as the slurmd of the release the plugins are built
    for does (`gres-rs --version`; `check --slurm-release` for another),
    so that a configuration can be checked before a node is drained by it.

EXAMPLES
    gres-rs check
        Check this host's node in /etc/slurm/slurm.conf and gres.conf.
    gres-rs check --all-nodes --slurm-conf ./slurm.conf
        Check every node of a configuration in progress.
    gres-rs detect --format gres-conf
        Print gres.conf lines for the GPUs of this host.
    gres-rs install --plugin-dir /opt/gres-rs/plugins
        Install the plugin files and print the PluginDir= line to use.

EXIT STATUS
    0   no problem found (or the command succeeded)
    1   problems found: an error in a configuration, no GPU detected, a
        plugin file refused
    2   usage error, or a file that cannot be read or written";

const CHECK_LONG_ABOUT: &str = "\
Predict, for each node, the GRES table slurmd would configure, after
slurm.conf and gres.conf are merged and the GRES plugins have done their
part (GPUs merged with fake_gpus.conf or NVML detection, MPS and shard
counts spread over the GPUs).  By default it is a table for people: per
node its CPUs, AutoDetect and where the GPUs come from, then one row per
GRES record (name, type, count, index, device files, cores; links,
unique id and flags where a record has them).  --format slurmd prints
instead the exact `Gres Name=... Type=... Count=... Index=... ID=...
File=...` lines of `slurmd -G`, to diff with it; --format json all of it
for programs.

gres.conf is read as the Slurm release the plugins are built for reads
it (--slurm-release for another): an AutoDetect= value or a Flags= word
that release does not know is reported with the release it exists from.

Then report every problem slurmd would only show as a log line or a
drained node: counts that disagree with slurm.conf, File= that is not a
device node of this host, duplicate device files (also one device under
two names: a symbolic link, MultipleFiles in another order), typed and
untyped records mixed, MPS/shard counts that do not divide over their
GPUs, conflicting environment flags, a Type no detected GPU matches, a GRES
name missing from GresTypes, AutoDetect=nvml where slurmd would fall back
to gpu/generic.
Errors point at the file, line and column, with a caret under the fault
and a suggestion where one is known.

The GRES table goes to standard output, problems to standard error
(--quiet: problems only).

It also predicts, as slurmd searches PluginDir, which file of each GRES
plugin slurmd loads and whether it accepts it (its release, the library it
names beside ours), and which gpu plugin it picks: gpu/nvml for AutoDetect=nvml
when it can load libnvidia-ml.so (from Slurm 24.05 also libnvidia-ml.so.1),
else gpu/generic; a gpu/nvml without an acceptable gpu_nvml.so (Debian's
packages ship none) stops slurmd.

DEFAULTS
    slurm.conf is $SLURM_CONF, else /etc/slurm/slurm.conf, else (a
    configless node) the copy slurmd got from slurmctld: /run/slurm/conf,
    then conf-cache in /var/lib/slurm/slurmd or /var/spool/slurmd, which
    check names when it reads it; gres.conf and fake_gpus.conf are read
    next to it.  PluginDir is slurm.conf's, else slurmd's own default,
    read as slurmd has it (compiled into the libslurmfull.so the
    installed slurmd loads): that directory is searched whatever is in
    it, dangling links included.  The node is the one whose NodeName
    or NodeHostname is this host's short name.  Device files are looked at
    and NVML is asked only for the node of this host.

EXAMPLES
    gres-rs check
    gres-rs check --node gpu07 --format json
    gres-rs check --all-nodes --no-device-check --slurm-conf new/slurm.conf
    diff <(gres-rs check --format slurmd | grep ^Gres) <(slurmd -G 2>&1 | sed -n 's/^slurmd: Gres/Gres/p')

EXIT STATUS
    0   no fatal problem and no error (warnings allowed); with
        --fail-on fatal: slurmd would start; with --fail-on warning: no
        problem at all
    1   slurmd would stop, or errors were found (or, with --fail-on, a
        problem of that severity)
    2   usage error, unreadable file, node not in slurm.conf

    In a slurmd drop-in, ExecStartPre=gres-rs check --quiet --fail-on fatal
    blocks a start only for what would stop slurmd anyway (an example is in
    the package's documentation).";

const DETECT_LONG_ABOUT: &str = "\
Ask NVML (libnvidia-ml.so.1, or the library given by --nvml-lib) for the
GPUs of this host, with the same names, device files, CPU affinity and
NVLinks as gres/gpu with AutoDetect=nvml sees them, MIG devices included.

With --usage PID, also what ours' gpu/nvml accounts to that process at
a poll of a step (sstat and sacct show it as gres/gpumem, in bytes
summed over the GPUs, and gres/gpuutil, in percent of one GPU's SMs
summed over the GPUs): the same NVML calls, the same rule.

EXAMPLES
    gres-rs detect
    gres-rs detect --format gres-conf --node-name gpu07 >> gres.conf
    gres-rs detect --nvml-lib /opt/nvidia/lib64/libnvidia-ml.so.1
    gres-rs detect --usage $(pgrep -n python)

EXIT STATUS
    0   GPUs were detected
    1   NVML is not available, or it reports no GPU
    2   usage error";

const INSTALL_LONG_ABOUT: &str = "\
Copy gres_gpu.so, gres_mps.so, gres_shard.so and gpu_nvml.so into DIR under
the names slurmd loads, with libgres_rs-<version>.so, the library that holds
the code of all four (each plugin file loads the library of its own version
from its own directory).  Each file
is written to a temporary file in DIR and renamed over the old one, so that
a running slurmd or slurmstepd that has the old file mapped keeps its copy
(overwriting a mapped library in place crashes the daemon).  The library is
installed first, then the plugin files, then the libraries of earlier
versions are removed, so that a daemon starting at any moment finds a
plugin file with its own library; plugin files that need functions the
library lacks (files of different builds) are refused.

The plugin files are built into this executable; the library is taken from
--from DIR (libgres_rs.so as cargo builds it, or libgres_rs-<version>.so as
installed), else from the directory of this executable (cargo's
target/<profile>/, where both are built).  Plugin files whose
plugin_version is not the installed slurmd's release are refused, since
slurmd would not load them; --force installs them anyway.

slurmd loads the plugins as root, and anyone who can write to a PluginDir
entry can make root's daemons load their code: DIR, and every directory
above it up to / (symlinks followed), must be owned by root and not
writable by group or others (a sticky /tmp is refused too); else nothing
is installed, unless --force, which warns.  Missing directories are made
with mode 0755 whatever the umask.  A directory or file of the package
manager (dpkg -S, rpm -qf), such as Debian's own plugin directory, is
refused even with --force: its next upgrade would overwrite the files and
rollback would be lost.  Temporary files are created with O_EXCL and
O_NOFOLLOW under random names, so that nothing planted in DIR is written
through.

Prints the PluginDir= line for slurm.conf: DIR first, then the directory
Slurm's own plugins are in.

EXAMPLES
    gres-rs install --plugin-dir /usr/local/lib/slurm-gres-rs
    gres-rs install --plugin-dir /opt/p --from target/release

ENVIRONMENT
    GRES_RS_SLURMD_VERSION   the installed release (e.g. 22.05.8), instead
                             of asking `slurmd -V`

EXIT STATUS
    0   installed
    1   a file was refused (version mismatch, not a plugin), or DIR (not
        root's, writable by others, the package manager's)
    2   usage error, file missing, DIR not writable";

const STATUS_LONG_ABOUT: &str = "\
For each slurmd, slurmstepd and slurmctld process of this host: which
gres/gpu, gres/mps, gres/shard and gpu plugin files it has mapped (from
/proc/<pid>/maps), whether each is ours (our library mapped from the same
directory) or stock, the Slurm release of its plugin_version, and whether
the file mapped is still the file installed at that path: a plugin replaced
or removed since the daemon started is marked, since the daemon runs the
old one until it is restarted.

A process counts as a daemon only when /proc/<pid>/exe is a Slurm daemon
binary (slurmd, slurmstepd, slurmctld or Debian's -wlm names; a regular
file of root's that group and others may not write) and its real and
effective uid are root's or slurm.conf's SlurmUser or SlurmdUser (root
only when slurm.conf cannot be read).  Any other process so named is
listed on an `ignored:` line with why, and never counts as running ours.
Paths, names and file contents are printed with control characters and
bytes that are not UTF-8 escaped (\\xNN, \\n, \\u{NNNN}), in JSON too;
/proc/<pid>/maps is read up to 16 MiB (beyond it: maps too large).

Reading another process's maps needs root (or the same user); where a
process cannot be looked at, the line says why.  A mapped file that was
replaced is read through /proc/<pid>/map_files (root only).

EXAMPLES
    gres-rs status
    gres-rs status --format json

EXIT STATUS
    0   a daemon of this host runs our plugins
    1   no daemon runs them (stock plugins only, or no daemon running)
    2   no daemon could be looked at (permissions), or /proc is unreadable";

const HEALTH_LONG_ABOUT: &str = "\
One health check of this node's GPUs, for slurm.conf's HealthCheckProgram
(slurmd runs it as root every HealthCheckInterval, with no arguments and
only SLURMD_NODENAME set: install the link gres-rs-health, which runs
`gres-rs health`).  It reads the XIDs the NVIDIA driver wrote to the
kernel log since the last run (each reported once, across runs and
reboots: the cursor in --state-dir), and counts the GPUs' device files and
NVIDIA GPUs on the PCI bus.  Each finding is classified by one table
(after NVIDIA's XID catalog: application faults such as XID 13, 31, 43 and
45 never drain), which /etc/slurm/gres-rs-health.conf may override.
With `step_xids = on` in that file, our GRES plugins record in --state-dir
when each job step held which GPUs, and each kernel XID names every step
that held its GPU at the time (the drain reason, JSON `jobs`); our
gpu/nvml also records the XIDs NVML told a `--gpu-freq` step of.  --jobs
lists both (job, step, user, GPU, XID).

When a finding calls for it, the node is drained with one reason that
names the GPU, the fault and the remedy, e.g.
  gres-rs: gpu 3 GPU-5c1b2e3f 0000:41:00.0 xid 79 (fallen off the bus)
  -> reboot node [resume:reboot@0f5c1b2e]
A node is resumed only when gres-rs drained it, the fault is one the table
marks recoverable, and the check is clean again; a drain an admin or
another tool set is never touched.  A guard (guard_max_nodes, default 10%
of the cluster) refuses to drain when that many nodes are already drained
by gres-rs: a driver bug must not empty a cluster.  Run with --dry-run
first.  docs/health.md has the table and the roll-out.

EXAMPLES
    gres-rs health --dry-run
    gres-rs health --kmsg /var/log/kern.log --dry-run --format json
    gres-rs health --jobs
    HealthCheckProgram=/usr/sbin/gres-rs-health

EXIT STATUS
    0   healthy (or resumed)
    1   warnings only (e.g. throttling)
    2   the check could not run (usage error, unreadable kernel log)
    3   unhealthy: drained now, kept drained, or drained by someone else
    4   unhealthy, and the guard refused to drain";

#[derive(Parser, Debug)]
#[command(name = "gres-rs", version, about = "Check, detect and install Slurm GPU GRES configurations", long_about = LONG_ABOUT)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Predict slurmd's GRES table for nodes and report configuration problems
    #[command(long_about = CHECK_LONG_ABOUT)]
    Check(CheckArgs),
    /// Show the GPUs NVML reports, as a table or gres.conf lines
    #[command(long_about = DETECT_LONG_ABOUT)]
    Detect(DetectArgs),
    /// Install the plugin files where slurmd loads them
    #[command(long_about = INSTALL_LONG_ABOUT)]
    Install(InstallArgs),
    /// Check this node's GPUs (XIDs, device files, PCI) and drain it when one fails: Slurm's HealthCheckProgram
    #[command(long_about = HEALTH_LONG_ABOUT)]
    Health(HealthArgs),
    /// Show which plugin files the running slurmd, slurmstepd and slurmctld have loaded
    #[command(long_about = STATUS_LONG_ABOUT)]
    Status(StatusArgs),
    /// Write the man pages or the shell completions into a directory (for packaging)
    #[command(hide = true)]
    Generate(GenerateArgs),
}

/// Output formats of `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StatusFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Output format
    #[arg(long, value_enum, default_value_t = StatusFormat::Text)]
    pub format: StatusFormat,
    /// slurm.conf whose SlurmUser and SlurmdUser run daemons besides root [default: $SLURM_CONF or /etc/slurm/slurm.conf]
    #[arg(long, value_name = "FILE")]
    pub slurm_conf: Option<PathBuf>,
}

/// What `generate` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GenerateWhat {
    /// gres-rs.1 and gres-rs-<command>.1
    Man,
    /// bash, zsh and fish completions
    Completions,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// What to write
    #[arg(value_enum)]
    pub what: GenerateWhat,
    /// Directory to write into (made if missing)
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Output formats of `check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// For people: per node a line (CPUs, AutoDetect, where the GPUs come from) and an aligned table of its GRES
    Text,
    /// The exact lines `slurmd -G` prints (NodeName=..., then Gres Name=...), for diffing with it
    Slurmd,
    /// One JSON document (schema version, every record and problem)
    Json,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// slurm.conf to read [default: $SLURM_CONF or /etc/slurm/slurm.conf]
    ///
    /// Not for sudo rules: the errors quote the lines of the file named (and
    /// of the gres.conf next to it), so whoever may run `gres-rs check
    /// --slurm-conf FILE` as root can read any file.
    #[arg(long, value_name = "FILE")]
    pub slurm_conf: Option<PathBuf>,
    /// gres.conf to read [default: gres.conf next to slurm.conf]
    ///
    /// Not for sudo rules either: the errors quote the file's lines.
    #[arg(long, value_name = "FILE")]
    pub gres_conf: Option<PathBuf>,
    /// Nodes to check, a hostlist expression such as gpu[01-04],gpu10 [default: this host's node]
    #[arg(short = 'n', long, visible_short_aliases = ['N', 'w'], visible_alias = "nodelist", value_name = "NODES", conflicts_with = "all_nodes")]
    pub node: Option<String>,
    /// Check every node of slurm.conf
    #[arg(short = 'a', long)]
    pub all_nodes: bool,
    /// Output format
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    pub format: CheckFormat,
    /// Do not look at device files (for a configuration of another host)
    #[arg(long)]
    pub no_device_check: bool,
    /// Do not ask NVML for this host's GPUs
    #[arg(long)]
    pub no_detect: bool,
    /// Also show notes (what slurmd logs at info and debug level)
    #[arg(short, long)]
    pub verbose: bool,
    /// Print only problems, not the GRES table
    #[arg(short, long)]
    pub quiet: bool,
    /// Exit with status 1 only for problems of this severity or worse (fatal: what would stop slurmd)
    #[arg(long, value_enum, value_name = "SEVERITY", default_value_t = FailOn::Error)]
    pub fail_on: FailOn,
    /// Read gres.conf as this Slurm release does (MAJOR.MINOR or MAJOR.MINOR.MICRO, e.g. 24.11) [default: the release the plugins are built for]
    #[arg(long, value_name = "RELEASE")]
    pub slurm_release: Option<String>,
}

/// The least severe problem that makes `check` exit with status 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Only what would stop slurmd (for ExecStartPre= of slurmd)
    Fatal,
    /// Fatal problems and errors
    Error,
    /// Any problem but notes
    Warning,
}

/// Output formats of `detect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DetectFormat {
    Table,
    GresConf,
    /// The node's Gres= (and Features=) for slurm.conf, as slurmd -C prints the rest
    SlurmConf,
    Json,
}

#[derive(Args, Debug)]
pub struct DetectArgs {
    /// Output format
    #[arg(long, value_enum, default_value_t = DetectFormat::Table)]
    pub format: DetectFormat,
    /// NodeName= for the gres.conf lines [default: none, lines for every node]
    #[arg(long, value_name = "NAME")]
    pub node_name: Option<String>,
    /// Also print NVML's log (debug lines included)
    #[arg(short, long)]
    pub verbose: bool,
    /// NVML library to load [default: libnvidia-ml.so.1, found by the dynamic loader]
    #[arg(long, value_name = "FILE")]
    pub nvml_lib: Option<PathBuf>,
    /// Directory of the GPUs' device files, for the File= paths [default: /dev]
    #[arg(long, value_name = "DIR")]
    pub dev_dir: Option<String>,
    /// The driver's mig-minors file [default: /proc/driver/nvidia-caps/mig-minors]
    #[arg(long, value_name = "FILE")]
    pub mig_minors: Option<PathBuf>,
    /// Also print the gres/gpumem and gres/gpuutil that gpu/nvml accounts to process PID now (repeatable)
    #[arg(long, value_name = "PID")]
    pub usage: Vec<u32>,
}

/// Output formats of `health`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthFormat {
    /// A line per finding, the verdict and what was done
    Text,
    /// One JSON document (findings, verdict, reason, action, exit status)
    Json,
}

#[derive(Args, Debug)]
pub struct HealthArgs {
    /// Decide and print, but change neither the node nor the XID cursor
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask Slurm for the node's state (sinfo) and change nothing: decide as for a node in service
    #[arg(long)]
    pub no_slurm: bool,
    /// Print the fault table (every XID and fault kind, with the site's rules applied) and exit
    #[arg(long)]
    pub list_faults: bool,
    /// List the jobs and steps that had a GPU when it faulted (kernel XIDs matched to step windows, and our gpu/nvml's records; step_xids = on) and exit
    #[arg(long, conflicts_with = "list_faults")]
    pub jobs: bool,
    /// Output format
    #[arg(long, value_enum, default_value_t = HealthFormat::Text)]
    pub format: HealthFormat,
    /// Slurm's name of this node [default: $SLURMD_NODENAME, else the short host name]
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Directory of the XID cursor, health.state, and the step XID records, step-xids [default: /var/lib/gres-rs]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Read the kernel log from FILE (dmesg output or saved /dev/kmsg records) instead of /dev/kmsg
    #[arg(long, value_name = "FILE")]
    pub kmsg: Option<PathBuf>,
    /// The site's rules over the fault table [default: /etc/slurm/gres-rs-health.conf, if it exists]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Also write the findings for node_exporter's textfile collector into FILE (replaced atomically)
    #[arg(long, value_name = "FILE")]
    pub textfile: Option<PathBuf>,
    /// Directory of the GPUs' device files [default: /dev]
    #[arg(long, value_name = "DIR")]
    pub dev_dir: Option<PathBuf>,
    /// The sysfs root whose bus/pci/devices lists the PCI devices [default: /sys]
    #[arg(long, value_name = "DIR")]
    pub sys_dir: Option<PathBuf>,
    /// NVML library to load [default: libnvidia-ml.so.1, found by the dynamic loader]
    #[arg(long, value_name = "FILE")]
    pub nvml_lib: Option<PathBuf>,
    /// Do not ask NVML (the kernel log and the counts outside NVML only)
    #[arg(long)]
    pub no_nvml: bool,
    /// The longest one NVML call may take before it counts as hanging
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub nvml_timeout: u64,
    /// The longest nvmlInit may take (the first init on a node without persistence mode loads the driver's state)
    #[arg(long, value_name = "MS", default_value_t = 20000)]
    pub nvml_init_timeout: u64,
    /// The whole check's time budget; slurmd kills a HealthCheckProgram after 60 s
    #[arg(long, value_name = "SECS", default_value_t = 40, value_parser = clap::value_parser!(u64).range(5..=3600))]
    pub budget: u64,
}

#[derive(Args, Debug)]
pub struct InstallArgs {
    /// Directory to install the plugin files into
    #[arg(long, value_name = "DIR")]
    pub plugin_dir: PathBuf,
    /// Directory holding the built libgres_rs.so (or libgres_rs-<version>.so) [default: this executable's directory]
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Install files whose plugin_version differs from the installed slurmd's, or into a DIR others may write to (with a warning)
    #[arg(long)]
    pub force: bool,
    /// slurm.conf whose PluginDir to extend [default: $SLURM_CONF or /etc/slurm/slurm.conf]
    #[arg(long, value_name = "FILE")]
    pub slurm_conf: Option<PathBuf>,
}

/// `--version`: ours, and the Slurm release the plugins are built for.
fn version() -> &'static str {
    let text = format!("{} (plugins for Slurm {})", env!("CARGO_PKG_VERSION"), slurm_gpu_gres::SLURM_VERSION);
    Box::leak(text.into_boxed_str())
}

fn main() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    // slurmd runs HealthCheckProgram with no arguments: as gres-rs-health
    // (a link to this program) it is `gres-rs health`.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.first().and_then(|a| Path::new(a).file_name()).is_some_and(|n| n == "gres-rs-health") {
        argv.insert(1, "health".into());
    }
    let matches = Cli::command().version(version()).get_matches_from(argv);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let code = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Detect(args) => detect::run(&args),
        Command::Install(args) => install::run(&args),
        Command::Status(args) => status::run(&args),
        Command::Health(args) => health::run(&args),
        Command::Generate(args) => generate::run(&args),
    };
    ExitCode::from(code)
}

/// An error of the tool itself, in the style of Slurm's commands.
pub fn tool_error(message: impl std::fmt::Display) {
    eprintln!("gres-rs: error: {message}");
}

/// Where a configless slurmd keeps the slurm.conf slurmctld sent it, after
/// `/etc/slurm/slurm.conf`: the runtime copy, then the cache in
/// `SlurmdSpoolDir` (Debian's default, then Slurm's).
pub const CONFIGLESS_COPIES: [&str; 3] =
    ["/run/slurm/conf/slurm.conf", "/var/lib/slurm/slurmd/conf-cache/slurm.conf", "/var/spool/slurmd/conf-cache/slurm.conf"];

/// slurm.conf as slurmd finds it: `$SLURM_CONF`, else
/// `/etc/slurm/slurm.conf`, else a configless node's copy (saying which
/// file is read then).
pub fn default_slurm_conf() -> PathBuf {
    let (path, why) = find_slurm_conf(std::env::var_os("SLURM_CONF"), &|p: &Path| p.is_file());
    if let Some(why) = why {
        eprintln!("gres-rs: reading {} ({why})", path.display());
    }
    path
}

/// [`default_slurm_conf`] over `exists`: the path, and why it is not the
/// usual one.
pub fn find_slurm_conf(env: Option<std::ffi::OsString>, exists: &dyn Fn(&Path) -> bool) -> (PathBuf, Option<&'static str>) {
    if let Some(v) = env.filter(|v| !v.is_empty()) {
        return (PathBuf::from(v), None);
    }
    let etc = PathBuf::from("/etc/slurm/slurm.conf");
    if exists(&etc) {
        return (etc, None);
    }
    match CONFIGLESS_COPIES.iter().map(PathBuf::from).find(|p| exists(p)) {
        Some(copy) => (copy, Some("no /etc/slurm/slurm.conf: the copy a configless slurmd got from slurmctld")),
        None => (etc, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn configless_nodes_read_slurmds_copy() {
        let only = |have: &'static [&'static str]| move |p: &Path| have.iter().any(|h| Path::new(h) == p);
        assert_eq!(find_slurm_conf(Some("/x/slurm.conf".into()), &only(&[])), (PathBuf::from("/x/slurm.conf"), None));
        assert_eq!(find_slurm_conf(None, &only(&["/etc/slurm/slurm.conf", "/run/slurm/conf/slurm.conf"])), (PathBuf::from("/etc/slurm/slurm.conf"), None));
        let (p, why) = find_slurm_conf(None, &only(&["/var/spool/slurmd/conf-cache/slurm.conf"]));
        assert_eq!(p, PathBuf::from("/var/spool/slurmd/conf-cache/slurm.conf"));
        assert!(why.unwrap().contains("configless"));
        assert_eq!(find_slurm_conf(Some("".into()), &only(&[])), (PathBuf::from("/etc/slurm/slurm.conf"), None));
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn node_and_all_nodes_conflict() {
        let e = Cli::try_parse_from(["gres-rs", "check", "--node", "a", "--all-nodes"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn long_help_has_sections() {
        let help = Cli::command().render_long_help().to_string();
        for section in ["DESCRIPTION", "EXAMPLES", "EXIT STATUS"] {
            assert!(help.contains(section), "{section} missing:\n{help}");
        }
        let mut cmd = Cli::command();
        let check = cmd.find_subcommand_mut("check").unwrap().render_long_help().to_string();
        assert!(check.contains("EXIT STATUS") && check.contains("--no-device-check"), "{check}");
    }
}
