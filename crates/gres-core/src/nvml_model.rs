//! The pure rules of NVML detection, as Slurm 22.05's gpu/nvml applies
//! them: GPU type names, MIG profile names and ids, CPU affinity masks,
//! NVLink strings, the `mig-minors` file, and the record of one detected
//! GPU.  No NVML call here: `crate::nvml` does those.

use super::model::{Bitmap, ConfFlags, GresRecord};
use super::record_rules::add_gres_record;

/// CPUs an NVML affinity mask can describe (Slurm's `MAX_CPUS`).
pub const MAX_CPUS: usize = 0x8000;
/// Bits of a word of NVML's affinity mask (a C `unsigned long`).
pub const ULONG_BITS: usize = std::ffi::c_ulong::BITS as usize;
/// Words in such a mask.
pub const CPU_SET_WORDS: usize = MAX_CPUS / ULONG_BITS;
/// Where the NVIDIA driver lists the minor numbers of MIG capability files.
pub const MIG_MINORS_PATH: &str = "/proc/driver/nvidia-caps/mig-minors";
/// Where the NVIDIA driver's device files are.
pub const DEV_DIR: &str = "/dev";

/// The device file of the GPU with this minor number (`/dev/nvidia3`).
pub fn device_file(dev_dir: &str, minor: u32) -> String {
    format!("{dev_dir}/nvidia{minor}")
}
/// The first driver whose MIG devices have their own `MIG-<uuid>` UUIDs.
pub const MIG_UUID_DRIVER: (u32, u32, u32) = (470, 42, 1);

/// Slurm's GPU type for an NVML device name: ASCII lower case, blanks to
/// `_` ("NVIDIA H100 80GB HBM3" -> "nvidia_h100_80gb_hbm3").
pub fn gpu_type_from_name(name: &str) -> String {
    name.chars().map(|c| if c == ' ' { '_' } else { c.to_ascii_lowercase() }).collect()
}

/// Whether a type name is one gpu/nvml gives a MIG device: it ends in a
/// MIG profile such as `_1g.10gb`, `_1c.3g.20gb` or `_1g.10gb+me`.
pub fn is_mig_type(type_name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(profile) = type_name.rsplit('_').next() else { return false };
    let profile = profile.split_once('+').map_or(profile, |(p, _)| p);
    let profile = profile.split_once("c.").filter(|(ci, _)| digits(ci)).map_or(profile, |(_, rest)| rest);
    profile.split_once("g.").is_some_and(|(slices, mem)| digits(slices) && mem.strip_suffix("gb").is_some_and(digits))
}

/// The part of a MIG device's type that comes from its GPU: the GPU's type
/// up to its first `-` ("nvidia_a100-sxm4-80gb" -> "nvidia_a100").
pub fn mig_type_base(gpu_type: &str) -> &str {
    gpu_type.split('-').next().unwrap_or(gpu_type)
}

/// The profile part of a MIG device's type from the name NVML gives the
/// MIG device (23.02 on): the name as a type, from its first `mig_` on,
/// without `mig` ("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb" -> "_1c.3g.20gb");
/// `None` when the name has no `mig_`.
pub fn mig_suffix_from_name(nvml_name: &str) -> Option<String> {
    let name = gpu_type_from_name(nvml_name);
    name.find("mig_").map(|i| name[i + 3..].to_string())
}

/// The profile part of a MIG device's type computed from its attributes,
/// where NVML's name gives none: `_<slices>g.<GiB>gb`.  Slurm 22.05 rounds
/// the memory to the nearest GiB; 23.02 on (`from_23_02`) rounds it up and
/// writes the compute instance's slices first (`_<n>c.`) when they are
/// fewer than the GPU instance's.
pub fn mig_suffix_from_attributes(gi_slices: u32, ci_slices: u32, memory_mib: u64, from_23_02: bool) -> String {
    if from_23_02 {
        let ci = if ci_slices != gi_slices { format!("{ci_slices}c.") } else { String::new() };
        format!("_{ci}{gi_slices}g.{}gb", memory_mib.div_ceil(1024))
    } else {
        let gib = memory_mib / 1024 + u64::from(memory_mib % 1024 >= 512);
        format!("_{gi_slices}g.{gib}gb")
    }
}

/// The type 22.05's gpu/nvml gives a MIG device of `slices` slices and
/// `memory_mib` MiB on a GPU of type `gpu_type`
/// ("nvidia_a100-sxm4-80gb", 1 slice, 9728 MiB -> "nvidia_a100_1g.10gb").
pub fn mig_type(gpu_type: &str, slices: u32, memory_mib: u64) -> String {
    format!("{}{}", mig_type_base(gpu_type), mig_suffix_from_attributes(slices, slices, memory_mib, false))
}

/// A driver version's first three numbers ("535.104.05" -> 535, 104, 5);
/// missing numbers read as 0, `None` when there is no leading number.
pub fn driver_version_triple(v: &str) -> Option<(u32, u32, u32)> {
    let mut parts = v.trim().split('.').map(|p| {
        let end = p.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(p.len());
        p[..end].parse::<u32>().ok()
    });
    let major = parts.next().flatten()?;
    let minor = parts.next().flatten().unwrap_or(0);
    let rev = parts.next().flatten().unwrap_or(0);
    Some((major, minor, rev))
}

/// Whether a MIG device's UniqueId is its own UUID (drivers from 470.42.01
/// on) rather than `MIG-<GPU uuid>/<GI>/<CI>`.  An unreadable version
/// counts as new: every driver with MIG enumeration still in use is.
pub fn use_mig_uuid(driver_version: &str) -> bool {
    driver_version_triple(driver_version).map(|v| v >= MIG_UUID_DRIVER).unwrap_or(true)
}

/// The UniqueId of a MIG device.
pub fn mig_unique_id(driver_version: &str, mig_uuid: &str, gpu_uuid: &str, gi: u32, ci: u32) -> String {
    if use_mig_uuid(driver_version) {
        mig_uuid.to_string()
    } else {
        format!("MIG-{gpu_uuid}/{gi}/{ci}")
    }
}

/// The CPUs of an NVML affinity mask ([`ULONG_BITS`] CPUs a word, CPU 0
/// in bit 0 of word 0, at most [`MAX_CPUS`]), as a bitmap just long enough
/// for its highest CPU.  (Slurm allocates all `MAX_CPUS` bits; only the
/// CPUs matter: the record's bitmap is fitted to the node's CPU count.)
pub fn cpu_mask_to_bitmap(words: &[u64]) -> Bitmap {
    let mut b = Bitmap::new(0);
    for (w, &word) in words.iter().enumerate().take(CPU_SET_WORDS) {
        let mut rest = word & ALL_ONES;
        while rest != 0 {
            b.set(w * ULONG_BITS + rest.trailing_zeros() as usize);
            rest &= rest - 1;
        }
    }
    b
}

/// An all-ones `unsigned long`.
const ALL_ONES: u64 = u64::MAX >> (64 - ULONG_BITS);

/// Slurm's `gpu_p_test_cpu_conv()` masks for `fake_gpus.conf` (`~zero`,
/// `~max`, `~one`, `~three`, `~half`, `~XX...` = that many all-ones
/// words): the machine CPU range, or `None` for an unknown keyword.
/// (`~zero` describes no CPU, which Slurm refuses fatally; here it is
/// `Some("")`.)
pub fn test_cpu_mask(keyword: &str) -> Option<String> {
    test_cpu_conv(keyword).map(|m| m.range)
}

/// What `gpu_p_test_cpu_conv()` makes of a known [`test_cpu_mask`]
/// keyword.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestCpuMask {
    /// The line it prints on the daemon's stdout (see `cpu_words_line`).
    pub stdout_line: String,
    /// The machine CPU range it returns (empty for `~zero`).
    pub range: String,
}

/// [`test_cpu_mask`] with the stdout line; `None` for an unknown keyword.
pub fn test_cpu_conv(keyword: &str) -> Option<TestCpuMask> {
    let words = test_cpu_words(keyword)?;
    Some(TestCpuMask { stdout_line: cpu_words_line(&words), range: cpu_mask_to_bitmap(&words).to_ranges() })
}

/// The NVML affinity words ([`CPU_SET_WORDS`] of them) of a
/// [`test_cpu_mask`] keyword, or `None` for an unknown keyword.
fn test_cpu_words(keyword: &str) -> Option<Vec<u64>> {
    let mut words = vec![0u64; CPU_SET_WORDS];
    let rest = keyword.strip_prefix('~')?;
    match rest {
        "zero" => {}
        "max" => words.iter_mut().for_each(|w| *w = ALL_ONES),
        "one" => words[0] = 1,
        "three" => words[0] = 3,
        "half" => words[0] = 0xff00,
        _ if rest.starts_with('X') => {
            let n = rest.len().min(CPU_SET_WORDS);
            words[..n].iter_mut().for_each(|w| *w = ALL_ONES);
        }
        _ => return None,
    }
    Some(words)
}

/// The line `gpu_p_test_cpu_conv()` prints to the daemon's stdout for
/// affinity words: per word `X` when its low 32 bits are all ones (Slurm
/// tests it as a C `int` equal to -1), else the number, in parentheses
/// when above 9 (`1000…`, `(65280)000…`, `XX00…`).
fn cpu_words_line(words: &[u64]) -> String {
    words
        .iter()
        .map(|&w| {
            if w as u32 == u32::MAX {
                "X".to_string()
            } else if w > 9 {
                format!("({w})")
            } else {
                w.to_string()
            }
        })
        .collect()
}

/// Slurm's NVLink string of GPU `index` among `count` GPUs: per GPU (in
/// NVML index order) the number of active links to it, `-1` for the GPU
/// itself.  `remote` holds each active link's remote PCI bus id; `lut` the
/// bus id of every GPU (`None` where the GPU could not be read).  Links to
/// anything else (NVSwitches, CPUs) are not counted.
pub fn links_string(index: usize, count: usize, lut: &[Option<String>], remote: &[String]) -> String {
    let mut links = vec![0i64; count];
    if let Some(me) = links.get_mut(index) {
        *me = -1;
    }
    for bus in remote {
        if let Some(k) = lut.iter().take(count).position(|b| b.as_deref() == Some(bus.as_str())) {
            if k != index {
                links[k] += 1;
            }
        }
    }
    join_links(&links)
}

/// Slurm's `gres_links_create_empty()`: `-1` at `index`, 0 elsewhere.
pub fn empty_links(index: usize, count: usize) -> String {
    let links: Vec<i64> = (0..count).map(|i| if i == index { -1 } else { 0 }).collect();
    join_links(&links)
}

fn join_links(links: &[i64]) -> String {
    links.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(",")
}

/// Minor numbers of a MIG device's GPU-instance and compute-instance
/// capability files, from the text of the driver's `mig-minors` file
/// (pairs `gpu<minor>/gi<GI>/access <N>` and
/// `gpu<minor>/gi<GI>/ci<CI>/access <N>`).  The error is the line to log.
pub fn mig_cap_minors(text: &str, gpu_minor: u32, gi: u32, ci: u32) -> Result<(u32, u32), String> {
    let gi_key = format!("gpu{gpu_minor}/gi{gi}/access");
    let ci_key = format!("gpu{gpu_minor}/gi{gi}/ci{ci}/access");
    let (mut gi_minor, mut ci_minor) = (None, None);
    let mut words = text.split_whitespace();
    let mut pair = 0;
    while let Some(key) = words.next() {
        pair += 1;
        let Some(value) = words.next().and_then(|v| v.parse::<u32>().ok()) else {
            return Err(format!("mig-minors: {pair}: Could not find tmp_str and/or tmp_val"));
        };
        if key == gi_key {
            gi_minor = Some(value);
        } else if key == ci_key {
            ci_minor = Some(value);
        }
        if let (Some(g), Some(c)) = (gi_minor, ci_minor) {
            return Ok((g, c));
        }
    }
    Err(format!("mig-minors: {}: Reached end of file. Could not find GPU={gpu_minor}|GI={gi}|CI={ci}", pair + 1))
}

/// The device files of a MIG device: its GPU's file, then the GPU-instance
/// and compute-instance capability files (`/dev/nvidia-caps/nvidia-cap<N>`).
pub fn mig_files(dev_dir: &str, gpu_file: &str, gi_minor: u32, ci_minor: u32) -> String {
    let cap = format!("{dev_dir}/nvidia-caps/nvidia-cap");
    format!("{gpu_file},{cap}{gi_minor},{cap}{ci_minor}")
}

/// What describes one detected GPU, for [`system_gpu_record`].
#[derive(Clone, Debug, Default)]
pub struct SystemGpu<'a> {
    pub cpu_cnt: u32,
    /// Abstract core range (`Cores=`).
    pub cpus: Option<&'a str>,
    /// Affinity as a machine CPU bitmap (Slurm keeps this form in the
    /// record's bitmap, while `cpus` is abstract).
    pub cpus_mac: Option<&'a Bitmap>,
    pub file: Option<&'a str>,
    pub type_name: Option<&'a str>,
    pub links: Option<&'a str>,
    pub unique_id: Option<&'a str>,
    pub flags: u32,
}

/// The record Slurm's `add_gres_to_list()` builds for one detected `gpu`
/// (count 1), through [`add_gres_record`]: the bitmap resized to
/// `cpu_cnt` bits, `HAS_FILE` (and `HAS_MULT` for several files) and
/// `HAS_TYPE` added to `flags`.  `Err` (the line to log) when the affinity
/// names a CPU past `cpu_cnt`, where Slurm stops slurmd.
pub fn system_gpu_record(g: &SystemGpu<'_>) -> Result<GresRecord, String> {
    let rec = GresRecord {
        flags: ConfFlags(g.flags),
        count: 1,
        cpu_cnt: g.cpu_cnt,
        cpus: g.cpus.map(str::to_string),
        cpus_bitmap: g.cpus_mac.cloned(),
        file: g.file.map(str::to_string),
        links: g.links.map(str::to_string),
        name: "gpu".to_string(),
        type_name: g.type_name.map(str::to_string),
        unique_id: g.unique_id.map(str::to_string),
        plugin_id: 0,
    };
    add_gres_record(rec).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gres_build_id;

    #[test]
    fn type_names() {
        assert_eq!(gpu_type_from_name("NVIDIA H100 80GB HBM3"), "nvidia_h100_80gb_hbm3");
        assert_eq!(gpu_type_from_name("NVIDIA A100-SXM4-80GB"), "nvidia_a100-sxm4-80gb");
        assert_eq!(gpu_type_from_name("Tesla V100-PCIE-32GB"), "tesla_v100-pcie-32gb");
        assert_eq!(gpu_type_from_name(""), "");
        assert_eq!(mig_type("nvidia_a100-sxm4-80gb", 1, 9728), "nvidia_a100_1g.10gb");
        assert!(is_mig_type("nvidia_a100_1g.10gb") && is_mig_type(&mig_type("nvidia_h100_80gb_hbm3", 7, 81000)));
        assert!(!is_mig_type("nvidia_a100-sxm4-80gb") && !is_mig_type("nvidia_h100_80gb_hbm3") && !is_mig_type("x_g.gb"));
        assert_eq!(mig_type("nvidia_a100-sxm4-40gb", 1, 4864), "nvidia_a100_1g.5gb");
        assert_eq!(mig_type("nvidia_a100-sxm4-40gb", 3, 19968), "nvidia_a100_3g.20gb");
        assert_eq!(mig_type("nvidia_h100_80gb_hbm3", 7, 81559), "nvidia_h100_80gb_hbm3_7g.80gb");
        assert_eq!(mig_type("x", 1, 1535), "x_1g.1gb");
        assert_eq!(mig_type("x", 1, 1536), "x_1g.2gb");
        // H100 80GB's 7g.80gb reports 81152 MiB (79.25 GiB): 22.05 calls it
        // 7g.79gb, 23.02 on (rounding up) 7g.80gb, NVML's own name 7g.80gb.
        assert_eq!(mig_type("nvidia_h100_80gb_hbm3", 7, 81152), "nvidia_h100_80gb_hbm3_7g.79gb");
        assert_eq!(mig_suffix_from_attributes(7, 7, 81152, true), "_7g.80gb");
        assert_eq!(mig_suffix_from_attributes(3, 1, 20096, true), "_1c.3g.20gb");
        assert_eq!(mig_suffix_from_attributes(3, 1, 20096, false), "_3g.20gb");
        assert_eq!(mig_suffix_from_attributes(1, 1, 1024, true), "_1g.1gb");
        assert_eq!(mig_suffix_from_attributes(1, 1, 1025, true), "_1g.2gb");
        assert_eq!(mig_suffix_from_name("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb").as_deref(), Some("_1c.3g.20gb"));
        assert_eq!(mig_suffix_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me").as_deref(), Some("_1g.10gb+me"));
        assert_eq!(mig_suffix_from_name("NVIDIA H100 80GB HBM3"), None);
        assert_eq!(mig_suffix_from_name(""), None);
        assert_eq!(mig_type_base("nvidia_a100-sxm4-40gb"), "nvidia_a100");
        for t in ["nvidia_a100_1c.3g.20gb", "nvidia_h100_80gb_hbm3_1g.10gb+me", "a100_7g.40gb"] {
            assert!(is_mig_type(t), "{t}");
        }
        for t in ["nvidia_a100_xc.3g.20gb", "nvidia_a100_1g.10", "nvidia_a100", "x_+me"] {
            assert!(!is_mig_type(t), "{t}");
        }
    }

    #[test]
    fn mig_ids_by_driver() {
        assert_eq!(driver_version_triple("535.104.05"), Some((535, 104, 5)));
        assert_eq!(driver_version_triple("550.54"), Some((550, 54, 0)));
        assert_eq!(driver_version_triple(""), None);
        assert!(use_mig_uuid("470.42.01"));
        assert!(!use_mig_uuid("470.42.00"));
        assert!(!use_mig_uuid("460.106.00"));
        assert!(use_mig_uuid("470.57.02"));
        assert!(use_mig_uuid("garbage"));
        assert_eq!(mig_unique_id("535.104.05", "MIG-abc", "GPU-1", 7, 0), "MIG-abc");
        assert_eq!(mig_unique_id("460.32.03", "MIG-GPU-1/7/0", "GPU-1", 7, 0), "MIG-GPU-1/7/0");
    }

    #[test]
    fn cpu_masks() {
        let b = cpu_mask_to_bitmap(&[0xff, 0, 1 << 3]);
        assert_eq!(b.size(), 2 * ULONG_BITS + 4);
        assert_eq!(b.to_ranges(), format!("0-7,{}", 2 * ULONG_BITS + 3));
        assert_eq!(cpu_mask_to_bitmap(&[0, 0]).count(), 0);
        assert_eq!(cpu_mask_to_bitmap(&vec![u64::MAX; CPU_SET_WORDS + 1]).size(), MAX_CPUS, "no CPU past MAX_CPUS");
        assert_eq!(test_cpu_mask("~one").unwrap(), "0");
        assert_eq!(test_cpu_mask("~three").unwrap(), "0-1");
        assert_eq!(test_cpu_mask("~half").unwrap(), "8-15");
        assert_eq!(test_cpu_mask("~XX").unwrap(), format!("0-{}", 2 * ULONG_BITS - 1));
        assert_eq!(test_cpu_mask("~max").unwrap(), format!("0-{}", MAX_CPUS - 1));
        assert_eq!(test_cpu_mask("~zero").unwrap(), "");
        assert_eq!(test_cpu_mask("~what"), None);
        assert_eq!(test_cpu_mask("F0"), None);
        let zeros = "0".repeat(CPU_SET_WORDS - 1);
        assert_eq!(cpu_words_line(&test_cpu_words("~one").unwrap()), format!("1{zeros}"));
        assert_eq!(cpu_words_line(&test_cpu_words("~half").unwrap()), format!("(65280){zeros}"));
        assert_eq!(cpu_words_line(&test_cpu_words("~XX").unwrap()), format!("XX{}", "0".repeat(CPU_SET_WORDS - 2)));
    }

    #[test]
    fn links() {
        let lut: Vec<Option<String>> = ["A", "B", "C"].iter().map(|s| Some(s.to_string())).collect();
        let remote: Vec<String> = ["B", "B", "C", "X", "A"].iter().map(|s| s.to_string()).collect();
        assert_eq!(links_string(0, 3, &lut, &remote), "-1,2,1");
        assert_eq!(links_string(1, 3, &lut, &[]), "0,-1,0");
        let holes = vec![Some("A".to_string()), None];
        assert_eq!(links_string(0, 2, &holes, &["A".to_string()]), "-1,0");
        assert_eq!(empty_links(2, 4), "0,0,-1,0");
        assert_eq!(empty_links(0, 1), "-1");
    }

    #[test]
    fn mig_minors() {
        let text = "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\ngpu1/gi1/access 147\ngpu1/gi1/ci0/access 148\n";
        assert_eq!(mig_cap_minors(text, 0, 1, 0), Ok((12, 13)));
        assert_eq!(mig_cap_minors(text, 1, 1, 0), Ok((147, 148)));
        let e = mig_cap_minors(text, 2, 1, 0).unwrap_err();
        assert!(e.contains("Reached end of file. Could not find GPU=2|GI=1|CI=0"), "{e}");
        assert!(mig_cap_minors("gpu0/gi1/access x", 0, 1, 0).unwrap_err().contains("Could not find tmp_str"));
        assert_eq!(mig_files(DEV_DIR, "/dev/nvidia0", 12, 13), "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13");
    }

    #[test]
    fn records_like_add_gres_to_list() {
        let mac = Bitmap::from_ranges(MAX_CPUS, "0-3").unwrap();
        let r = system_gpu_record(&SystemGpu {
            cpu_cnt: 8,
            cpus: Some("0-3"),
            cpus_mac: Some(&mac),
            file: Some("/dev/nvidia0"),
            type_name: Some("nvidia_h100_80gb_hbm3"),
            links: Some("-1,0"),
            unique_id: None,
            flags: ConfFlags::ENV_NVML,
        })
        .unwrap();
        assert_eq!(r.flags, ConfFlags(ConfFlags::ENV_NVML | ConfFlags::HAS_FILE | ConfFlags::HAS_TYPE));
        assert_eq!(r.cpus_bitmap.as_ref().unwrap().size(), 8);
        assert_eq!(r.cpus_bitmap.as_ref().unwrap().to_ranges(), "0-3");
        assert_eq!((r.name.as_str(), r.count, r.plugin_id), ("gpu", 1, gres_build_id("gpu")));

        let m = system_gpu_record(&SystemGpu {
            cpu_cnt: 8,
            file: Some(&mig_files(DEV_DIR, "/dev/nvidia0", 1, 2)),
            flags: ConfFlags::ENV_NVML,
            ..Default::default()
        })
        .unwrap();
        assert!(m.flags.has(ConfFlags::HAS_MULT) && m.flags.has(ConfFlags::HAS_FILE) && !m.flags.has(ConfFlags::HAS_TYPE));

        let null = system_gpu_record(&SystemGpu { cpu_cnt: 8, flags: ConfFlags::ENV_NVML, ..Default::default() }).unwrap();
        assert_eq!(null.flags, ConfFlags(ConfFlags::ENV_NVML));
        assert_eq!((null.file.clone(), null.cpus_bitmap.clone()), (None, None));

        let wide = Bitmap::from_ranges(MAX_CPUS, "0-15").unwrap();
        let e = system_gpu_record(&SystemGpu { cpu_cnt: 8, cpus_mac: Some(&wide), ..Default::default() }).unwrap_err();
        assert!(e.starts_with("This CPU affinity bitmask (0xFFFF) does not fit"), "{e}");
    }
}
