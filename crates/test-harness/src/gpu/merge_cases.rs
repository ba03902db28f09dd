//! The gres/gpu merging cases: a node's `Gres=`, gres.conf and
//! fake_gpus.conf (Slurm's stand-in for GPU detection), used by
//! tests/gpu_merge.rs (stock vs ours) and tests/gpu_leaks.rs (valgrind).

use crate::{ClusterConfig, PluginSet};

/// One `slurmd -G` merging case.
pub struct MergeCase {
    pub name: &'static str,
    /// Node `Gres=` in slurm.conf.
    pub node_gres: &'static str,
    pub gres_conf: &'static str,
    pub fake_gpus: &'static str,
    /// Fake device nodes {DEV}/nvidia0..
    pub devices: u32,
}

impl MergeCase {
    pub fn config(&self) -> ClusterConfig {
        let mut c = ClusterConfig::gpus(PluginSet::Stock, self.devices);
        c.node_gres = Some(self.node_gres.to_string());
        c.gres_conf = self.gres_conf.to_string();
        c.fake_gpus_conf = Some(self.fake_gpus.to_string());
        c
    }
}

/// The node has 4 CPUs (1 socket x 4 cores); fake lines are
/// `type|cpu_count|cpu_range|links|file[|unique_id[|flags]]`.
pub const MERGE_CASES: &[MergeCase] = &[
    MergeCase {
        name: "out-of-order-device-files",
        node_gres: "gpu:4",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-3]\n",
        fake_gpus: "(null)|4|0|(null)|{DEV}/nvidia3\n\
                    (null)|4|1|(null)|{DEV}/nvidia1\n\
                    (null)|4|2|(null)|{DEV}/nvidia0\n\
                    (null)|4|3|(null)|{DEV}/nvidia2\n",
        devices: 4,
    },
    MergeCase {
        name: "file-list-out-of-order",
        node_gres: "gpu:4",
        gres_conf: "Name=gpu File={DEV}/nvidia2,{DEV}/nvidia0,{DEV}/nvidia3,{DEV}/nvidia1\n",
        fake_gpus: "(null)|4|0-3|(null)|{DEV}/nvidia0\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia1\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia2\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        name: "typed-exact",
        node_gres: "gpu:tesla:2,gpu:k80:2",
        gres_conf: "Name=gpu Type=tesla File={DEV}/nvidia[0-1]\n\
                    Name=gpu Type=k80 File={DEV}/nvidia[2-3]\n",
        fake_gpus: "k80|4|2-3|(null)|{DEV}/nvidia3\n\
                    tesla|4|0-1|(null)|{DEV}/nvidia0\n\
                    k80|4|2-3|(null)|{DEV}/nvidia2\n\
                    tesla|4|0-1|(null)|{DEV}/nvidia1\n",
        devices: 4,
    },
    MergeCase {
        name: "typed-substring",
        node_gres: "gpu:tesla:2,gpu:k80:2",
        gres_conf: "Name=gpu Type=tesla File={DEV}/nvidia[0-1]\n\
                    Name=gpu Type=k80 File={DEV}/nvidia[2-3]\n",
        fake_gpus: "Tesla-V100-SXM2|4|0-1|(null)|{DEV}/nvidia0\n\
                    Tesla-V100-SXM2|4|0-1|(null)|{DEV}/nvidia1\n\
                    NVIDIA-K80|4|2-3|(null)|{DEV}/nvidia2\n\
                    NVIDIA-K80|4|2-3|(null)|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        // k20m is a substring of k20m1: the longest type must match first.
        name: "typed-substring-longest-first",
        node_gres: "gpu:k20m:2,gpu:k20m1:2",
        gres_conf: "Name=gpu Type=k20m File={DEV}/nvidia[0-1]\n\
                    Name=gpu Type=k20m1 File={DEV}/nvidia[2-3]\n",
        fake_gpus: "tesla-k20m|4|0-3|(null)|{DEV}/nvidia0\n\
                    tesla-k20m1|4|0-3|(null)|{DEV}/nvidia2\n\
                    tesla-k20m|4|0-3|(null)|{DEV}/nvidia1\n\
                    tesla-k20m1|4|0-3|(null)|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        name: "untyped-conf-typed-system",
        node_gres: "gpu:4",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-3]\n",
        fake_gpus: "tesla|4|0-1|(null)|{DEV}/nvidia0\n\
                    tesla|4|0-1|(null)|{DEV}/nvidia1\n\
                    k80|4|2-3|(null)|{DEV}/nvidia2\n\
                    k80|4|2-3|(null)|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        name: "typed-conf-untyped-system",
        node_gres: "gpu:tesla:2,gpu:k80:2",
        gres_conf: "Name=gpu Type=tesla File={DEV}/nvidia[0-1]\n\
                    Name=gpu Type=k80 File={DEV}/nvidia[2-3]\n",
        fake_gpus: "(null)|4|0-1|(null)|{DEV}/nvidia0\n\
                    (null)|4|0-1|(null)|{DEV}/nvidia1\n\
                    (null)|4|2-3|(null)|{DEV}/nvidia2\n\
                    (null)|4|2-3|(null)|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        name: "typed-mixed-system",
        node_gres: "gpu:tesla:2,gpu:k80:2",
        gres_conf: "Name=gpu Type=tesla File={DEV}/nvidia[0-1]\n\
                    Name=gpu Type=k80 File={DEV}/nvidia[2-3]\n",
        fake_gpus: "tesla|4|0-1|(null)|{DEV}/nvidia0\n\
                    (null)|4|0-1|(null)|{DEV}/nvidia1\n\
                    v100|4|2-3|(null)|{DEV}/nvidia2\n\
                    k80|4|2-3|(null)|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        name: "typed-conf-without-files",
        node_gres: "gpu:tesla:2,gpu:k80:2",
        gres_conf: "Name=gpu Type=tesla Count=2\nName=gpu Type=k80 Count=2\n",
        fake_gpus: "k80|4|2-3|(null)|{DEV}/nvidia2\n\
                    tesla|4|0-1|(null)|{DEV}/nvidia0\n\
                    k80|4|2-3|(null)|{DEV}/nvidia3\n\
                    tesla|4|0-1|(null)|{DEV}/nvidia1\n",
        devices: 4,
    },
    MergeCase {
        name: "cores-mismatch",
        node_gres: "gpu:4",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-1] Cores=0-1\n\
                    Name=gpu File={DEV}/nvidia[2-3] Cores=2-3\n",
        fake_gpus: "(null)|4|0-1|(null)|{DEV}/nvidia0\n\
                    (null)|4|2-3|(null)|{DEV}/nvidia1\n\
                    (null)|4|2-3|(null)|{DEV}/nvidia2\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        name: "links-mismatch",
        node_gres: "gpu:2",
        gres_conf: "Name=gpu File={DEV}/nvidia0 Links=-1,2\n\
                    Name=gpu File={DEV}/nvidia1 Links=2,-1\n",
        fake_gpus: "(null)|4|0-3|-1,1|{DEV}/nvidia0\n\
                    (null)|4|0-3|2,-1|{DEV}/nvidia1\n",
        devices: 2,
    },
    MergeCase {
        name: "cores-links-match",
        node_gres: "gpu:2",
        gres_conf: "Name=gpu File={DEV}/nvidia0 Cores=0-1 Links=-1,2\n\
                    Name=gpu File={DEV}/nvidia1 Cores=2-3 Links=2,-1\n",
        fake_gpus: "(null)|4|0-1|-1,2|{DEV}/nvidia0\n\
                    (null)|4|2-3|2,-1|{DEV}/nvidia1\n",
        devices: 2,
    },
    MergeCase {
        name: "cores-links-from-system",
        node_gres: "gpu:4",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-3]\n",
        fake_gpus: "(null)|4|0-1|-1,1,1,1|{DEV}/nvidia0\n\
                    (null)|4|0-1|1,-1,1,1|{DEV}/nvidia1\n\
                    (null)|4|2-3|1,1,-1,1|{DEV}/nvidia2\n\
                    (null)|4|2-3|1,1,1,-1|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        // Links stand for PCI bus order: the final list follows them.
        name: "links-order",
        node_gres: "gpu:4",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-3]\n",
        fake_gpus: "(null)|4|0|0,0,0,-1|{DEV}/nvidia0\n\
                    (null)|4|1|0,0,-1,0|{DEV}/nvidia1\n\
                    (null)|4|2|0,-1,0,0|{DEV}/nvidia2\n\
                    (null)|4|3|-1,0,0,0|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        name: "extra-system-gpus",
        node_gres: "gpu:2",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-1]\n",
        fake_gpus: "(null)|4|0-3|(null)|{DEV}/nvidia0\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia1\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia2\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        name: "extra-system-gpus-no-conf",
        node_gres: "gpu:2",
        gres_conf: "",
        fake_gpus: "(null)|4|0-3|(null)|{DEV}/nvidia0\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia1\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia2\n",
        devices: 3,
    },
    MergeCase {
        name: "missing-system-gpus",
        node_gres: "gpu:4",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-3]\n",
        fake_gpus: "(null)|4|0-1|(null)|{DEV}/nvidia1\n\
                    (null)|4|2-3|(null)|{DEV}/nvidia3\n",
        devices: 4,
    },
    MergeCase {
        name: "conf-count-without-file",
        node_gres: "gpu:4",
        gres_conf: "Name=gpu Count=4\n",
        fake_gpus: "(null)|4|0-3|(null)|{DEV}/nvidia0\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia1\n",
        devices: 2,
    },
    MergeCase { name: "empty-fake-gpus-conf", node_gres: "gpu:2", gres_conf: "Name=gpu File={DEV}/nvidia[0-1]\n", fake_gpus: "", devices: 2 },
    MergeCase {
        name: "comments-and-blank-lines",
        node_gres: "gpu:2",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-1]\n",
        fake_gpus: "# fake GPUs\n\n(null)|4|0-1|(null)|{DEV}/nvidia1\n\n#(null)|4|0-1|(null)|{DEV}/nvidia0\n(null)|4|2-3|(null)|{DEV}/nvidia0\n",
        devices: 2,
    },
    MergeCase {
        name: "env-flags-from-system",
        node_gres: "gpu:2",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-1]\n",
        fake_gpus: "(null)|4|0-3|(null)|{DEV}/nvidia0|(null)|amd_gpu_env\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia1|(null)|amd_gpu_env,opencl_env\n",
        devices: 2,
    },
    MergeCase {
        name: "env-flags-conf-wins",
        node_gres: "gpu:2",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-1] Flags=nvidia_gpu_env\n",
        fake_gpus: "(null)|4|0-3|(null)|{DEV}/nvidia0|(null)|amd_gpu_env\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia1|(null)|intel_gpu_env\n",
        devices: 2,
    },
    MergeCase {
        name: "unique-ids",
        node_gres: "gpu:3",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-2]\n",
        fake_gpus: "(null)|4|0-3|(null)|{DEV}/nvidia0|MIG-11111111-2222-3333-4444-555555555555\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia1\n\
                    (null)|4|0-3|(null)|{DEV}/nvidia2|GPU-abcdef|nvidia_gpu_env\n",
        devices: 3,
    },
    MergeCase {
        name: "mps-and-shard-beside",
        node_gres: "gpu:2,mps:200,shard:4",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-1]\n\
                    Name=mps Count=200 File={DEV}/nvidia[0-1]\n\
                    Name=shard Count=4 File={DEV}/nvidia[0-1]\n",
        fake_gpus: "(null)|4|2-3|(null)|{DEV}/nvidia1\n\
                    (null)|4|0-1|(null)|{DEV}/nvidia0\n",
        devices: 2,
    },
    MergeCase {
        // fake_gpus.conf stands in for detection whatever AutoDetect says.
        name: "autodetect-off-with-fake",
        node_gres: "gpu:2",
        gres_conf: "AutoDetect=off\nName=gpu File={DEV}/nvidia[0-1]\n",
        fake_gpus: "(null)|4|2-3|(null)|{DEV}/nvidia1\n\
                    (null)|4|0-1|(null)|{DEV}/nvidia0\n",
        devices: 2,
    },
];
