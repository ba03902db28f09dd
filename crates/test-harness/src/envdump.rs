//! The environment dumps of jobs, prologs and epilogs: the GPU-related
//! variables, the `dump-env` helper script and the blocks it leaves.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// The variables the GPU, MPS and shard plugins set.
pub const PLUGIN_ENV_VARS: &[&str] = &[
    "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS",
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "GPU_DEVICE_ORDINAL",
    "SLURM_GPUS_ON_NODE",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "CUDA_DEVICE_ORDER",
    "SLURM_SHARDS_ON_NODE",
];

/// The GPU request variables srun and sbatch set themselves.
pub const REQUEST_ENV_VARS: &[&str] = &[
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GPUS_PER_SOCKET",
    "SLURM_GPU_BIND",
    "SLURM_GPU_FREQ",
    "SLURM_CPUS_PER_GPU",
    "SLURM_MEM_PER_GPU",
    "SLURM_TRES_PER_TASK",
    "SLURM_JOB_GRES",
];

/// True for variables the GPU/MPS/shard plugins (or GPU options) affect.
pub fn is_gpu_var(name: &str) -> bool {
    if PLUGIN_ENV_VARS.contains(&name) || REQUEST_ENV_VARS.contains(&name) {
        return true;
    }
    if name == "GRES_RS_DUMP_ENV" {
        return false;
    }
    let u = name.to_ascii_uppercase();
    ["GPU", "CUDA", "ROCR_", "ZE_AFFINITY", "ZE_ENABLE", "SHARD", "_MPS", "NVIDIA_", "GRES", "TRES"].iter().any(|p| u.contains(p))
}

/// The shell helper installed as `<cluster>/bin/dump-env` (and exported to
/// jobs as `$GRES_RS_DUMP_ENV`): `dump-env <tag>` saves the full
/// environment (NUL-separated) as `<dumps>/<tag>.<time>.<pid>.env` and
/// prints the GPU-related part for humans. Tags: [A-Za-z0-9_-].
pub fn dump_env_script_text(dumps: &Path) -> String {
    format!(
        r#"#!/bin/sh
# environment dump helper of the slurm-gpu-gres test harness
tag="${{1:-task}}"
d='{dir}'
f="$d/$tag.$(date +%s%N).$$.env"
env -0 > "$f.tmp" && mv "$f.tmp" "$f"
out="== $tag job=${{SLURM_JOB_ID:-}} step=${{SLURM_STEP_ID:-}} task=${{SLURM_PROCID:-}} on $(hostname -s)
$(env | grep -E '^(SLURM_(JOB|STEP)_GPUS|SLURM_GPUS|SLURM_SHARDS|CUDA_|ROCR_|ZE_|GPU_)' | LC_ALL=C sort | sed 's/^/    /')"
printf '%s\n' "$out"
"#,
        dir = dumps.display()
    )
}

/// One environment captured by the dump helper.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvBlock {
    pub tag: String,
    pub vars: BTreeMap<String, String>,
}

impl EnvBlock {
    pub fn get(&self, k: &str) -> Option<&str> {
        self.vars.get(k).map(|s| s.as_str())
    }
    /// Only the GPU-related variables.
    pub fn gpu_vars(&self) -> BTreeMap<String, String> {
        self.vars.iter().filter(|(k, _)| is_gpu_var(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
    }
    fn num(&self, k: &str) -> i64 {
        self.get(k).and_then(|v| v.parse().ok()).unwrap_or(-1)
    }
    pub fn job_id(&self) -> i64 {
        self.num("SLURM_JOB_ID")
    }
    pub fn step_id(&self) -> i64 {
        self.num("SLURM_STEP_ID")
    }
    pub fn proc_id(&self) -> i64 {
        self.num("SLURM_PROCID")
    }
    /// The node it was recorded on (`SLURMD_NODENAME`; "" when unset).
    pub fn node(&self) -> &str {
        self.get("SLURMD_NODENAME").unwrap_or("")
    }
    /// "tag job.step task" (and the node, when known) for messages.
    pub fn describe(&self) -> String {
        let node = if self.node().is_empty() { String::new() } else { format!(" on {}", self.node()) };
        format!(
            "{} job={} step={} task={}{node}",
            self.tag,
            self.get("SLURM_JOB_ID").unwrap_or("-"),
            self.get("SLURM_STEP_ID").unwrap_or("-"),
            self.get("SLURM_PROCID").unwrap_or("-")
        )
    }
}

/// Reads (and moves aside into `<dumps>/collected/`) all finished dumps.
pub fn collect_dumps(dumps: &Path) -> Vec<EnvBlock> {
    let mut v = Vec::new();
    let archive = dumps.join("collected");
    let _ = fs::create_dir_all(&archive);
    let Ok(rd) = fs::read_dir(dumps) else {
        return v;
    };
    let mut files: Vec<_> = rd.flatten().map(|e| e.path()).filter(|p| p.extension().map(|e| e == "env").unwrap_or(false)).collect();
    files.sort();
    for p in files {
        let Ok(bytes) = fs::read(&p) else { continue };
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let tag = name.split('.').next().unwrap_or("").to_string();
        let mut vars = BTreeMap::new();
        for item in bytes.split(|b| *b == 0) {
            let s = String::from_utf8_lossy(item);
            if let Some((k, val)) = s.split_once('=') {
                vars.insert(k.to_string(), val.to_string());
            }
        }
        v.push(EnvBlock { tag, vars });
        let _ = fs::rename(&p, archive.join(&name));
    }
    v
}
