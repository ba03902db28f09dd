//! Our gpu_nvml.so in a real slurmd, on every release of the test bed
//! (`GRES_RS_SLURM`): `slurmd -G` with `AutoDetect=nvml` on the NVML
//! stand-in (reachable as `libnvidia-ml.so`, which is what makes slurmd
//! choose gpu/nvml) must report the same GPUs as the release's own stock
//! gpu/nvml on the same stand-in.
//!
//! Debian ships no gpu_nvml.so; the test bed builds the stock one of every
//! release ([`testbed::TestBed::stock_gpu_nvml`]; the host's 22.05.8 from
//! Debian's source package).  Where it is missing outside CI,
//! `autodetect_nvml_matches_fake_gpus_conf` compares with the release's
//! stock gres/gpu given the same node in `fake_gpus.conf` (read by stock
//! gres_gpu.so up to 25.11, by slurmd's core from 26.05:
//! `gpu_g_get_system_gpu_list`, src/interfaces/gpu.c).
//! gres/gpu is the release's or ours.  In a chroot the stand-in is bound
//! at its host path ([`standin::chroot_binds`]).  Needs root, the Debian
//! Slurm packages and `cargo build --workspace` (see crates/test-harness);
//! skipped otherwise.

use gres_test_harness as harness;
use gres_test_harness::standin;

use harness::*;

/// The node of fixtures/slurmd_node.conf as stock fake_gpus.conf lines:
/// `type|cpu count|cpus|links|file|unique id|flags`.
const FAKE_GPUS: &str = "\
nvidia_h100_80gb_hbm3|2|0|-1,2,0|/dev/nvidia0|(null)|nvidia_gpu_env
nvidia_h100_80gb_hbm3|2|1|2,-1,0|/dev/nvidia1|(null)|nvidia_gpu_env
nvidia_a100_1g.10gb|2|0-1|-1,0|/dev/nvidia2,/dev/nvidia-caps/nvidia-cap336,/dev/nvidia-caps/nvidia-cap337|MIG-3f9a1b2c-0d4e-5f6a-7b8c-9d0e1f2a3b4c|nvidia_gpu_env
nvidia_a100_1g.10gb|2|0-1|0,-1|/dev/nvidia2,/dev/nvidia-caps/nvidia-cap345,/dev/nvidia-caps/nvidia-cap346|MIG-4f9a1b2c-0d4e-5f6a-7b8c-9d0e1f2a3b4c|nvidia_gpu_env
";

fn node(plugins: PluginSet) -> ClusterConfig {
    // Typed, so that slurmd keeps the detected types (an untyped Gres=
    // makes it drop them) and the lines show them.
    let gres = "gpu:nvidia_h100_80gb_hbm3:2,gpu:nvidia_a100_1g.10gb:2";
    let mut c = ClusterConfig::gpus(plugins, 0).with_cpus(1, 2, 1).with_gres(gres, "AutoDetect=nvml\n").with_binds(standin::chroot_binds());
    c.debug_gres = true;
    c.slurmd_debug = "debug2".into();
    // gres/gpu and gpu/nvml alone: with mps or shard in GresTypes the stock
    // sharing plugins make a GPU of each MIG file (docs/deviations.md,
    // MPS/shard 6; tests/nvml_jobs.rs covers MIG with them loaded).
    c.gres_types = "gpu".into();
    c
}

/// A `slurmd -G` GPU line of a MIG device (its files name nvidia-caps)
/// with the MIG flag added to its flags; other lines unchanged.
fn with_mig_flag(line: &str) -> String {
    if !line.contains("nvidia-caps/") {
        return line.to_string();
    }
    line.split(' ').map(|w| if w.starts_with("Flags=") || w.starts_with("Flags:") { format!("{w},MIG") } else { w.to_string() }).collect::<Vec<_>>().join(" ")
}

/// `lines` (of ours) as stock gpu/nvml of `bed` gives them where only
/// the documented difference separates them: a MIG record's links
/// (`-1,0`, ours) are none (`(null)`, stock 23.02 on; docs/deviations.md
/// NVML 6), and with them the order gres/gpu sorts the records in; sorted.
fn as_stock_mig_links(bed: &testbed::TestBed, lines: &[String]) -> Vec<String> {
    let mut v: Vec<String> = lines
        .iter()
        .map(|l| {
            if bed.behaviour.nvml_mig_links || !l.contains("nvidia-caps/") {
                return l.clone();
            }
            let links = l.split(' ').find(|w| w.starts_with("Links=")).unwrap_or_default();
            assert!(links.contains("-1"), "ours gives a MIG record its links: {l}");
            l.replace(links, "Links=(null)")
        })
        .collect();
    v.sort();
    v
}

/// The GPU lines of `slurmd -G`: the final merged list and the
/// `Gres Name=` summary, without log prefixes (the release's,
/// `StockQuirks::log_prefix`, then the level).
fn sorted(lines: &[String]) -> Vec<String> {
    let mut v = lines.to_vec();
    v.sort();
    v
}

fn gpu_lines(g: &SlurmdG) -> Vec<String> {
    g.normalized()
        .lines()
        .filter(|l| l.contains("GRES[gpu]") || l.contains("Gres Name=gpu"))
        .map(|l| {
            let l = g.log_prefix.strip(l, "slurmd");
            let l = l.split_once(": ").filter(|(lvl, _)| !lvl.contains(' ')).map(|(_, rest)| rest).unwrap_or(l);
            l.trim().to_string()
        })
        .collect()
}

per_release! {
    fn autodetect_nvml_matches_fake_gpus_conf(bed) {
        let lib_dir = standin::library_dir();

        let env = vec![
            ("LD_LIBRARY_PATH".to_string(), lib_dir.to_string_lossy().into_owned()),
            ("GRES_RS_NVML_FIXTURE".to_string(), standin::fixture("slurmd_node.conf").to_string_lossy().into_owned()),
        ];
        let stock_oracle = bed.stock_gpu_nvml().is_ok();
        let (want, want_lines) = match bed.stock_gpu_nvml() {
            // The release's own stock gpu/nvml on the same NVML: the oracle.
            Ok(stock_nvml) => {
                let mut stock = node(PluginSet::Stock);
                stock.extra_stock_plugins = vec![stock_nvml];
                stock.slurmd_env = env.clone();
                stock.slurmd_env.push((gres_test_harness::MIG_MINORS_ENV.into(), standin::fixture("mig-minors").to_string_lossy().into_owned()));
                let want = Cluster::slurmd_g(&stock);
                assert!(want.normalized().contains("3 GPU system device(s) detected"), "stock gpu/nvml did not detect:\n{}", want.normalized());
                let lines = gpu_lines(&want);
                (want, lines)
            }
            // None (the test bed was not set up; never in CI): stock
            // gres/gpu on the node written out in fake_gpus.conf.
            Err(why) => {
                eprintln!("autodetect_nvml_matches_fake_gpus_conf [Slurm {}]: {why}; the oracle is fake_gpus.conf", bed.version);
                let mut stock = node(PluginSet::Stock);
                // Where gpu/nvml flags MIG devices MIG
                // (`StockQuirks::nvml_flags_mig`, 25.11+) and UUID
                // (`nvml_flags_mig_uuid`, 26.05), fake_gpus.conf asks for
                // UUID itself (`env_uuid`); MIG it cannot say, so that flag
                // is added to the stock lines of the MIG devices (and
                // nothing else).
                let fake: String = FAKE_GPUS
                    .lines()
                    .map(|l| if bed.behaviour.nvml_flags_mig_uuid && l.contains("|MIG-") { format!("{l},env_uuid\n") } else { format!("{l}\n") })
                    .collect();
                stock.fake_gpus_conf = Some(fake);
                let want = Cluster::slurmd_g(&stock);
                let mut lines = gpu_lines(&want);
                if bed.behaviour.nvml_flags_mig {
                    lines = lines.iter().map(|l| with_mig_flag(l)).collect();
                }
                (want, lines)
            }
        };
        assert!(!want_lines.is_empty(), "stock slurmd -G printed no GPU lines:\n{}", want.normalized());

        // Our gpu_nvml.so under stock gres_gpu.so, then all of ours.
        for (set, loaded) in [(PluginSet::OursOnly(vec!["gpu_nvml".into()]), vec!["gpu_nvml"]), (PluginSet::Ours, vec!["gpu_nvml", "gres_gpu"])] {
            let label = set.label();
            // The test build: it reads GRES_RS_MIG_MINORS.
            let Some(mut ours) = bed.ours_config(node(set).with_test_build(), "autodetect_nvml_matches_fake_gpus_conf") else { return };
            ours.slurmd_env = env.clone();
            ours.slurmd_env.push(("GRES_RS_MIG_MINORS".into(), standin::fixture("mig-minors").to_string_lossy().into_owned()));
            let got = Cluster::slurmd_g(&ours);
            got.assert_ours_loaded(&loaded);
            let got_lines = gpu_lines(&got);
            let (got_lines, want_lines) = if stock_oracle { (as_stock_mig_links(bed, &got_lines), sorted(&want_lines)) } else { (got_lines, want_lines.clone()) };
            assert_eq!(
                got_lines,
                want_lines,
                "{label}\n---- stock (fake_gpus.conf) ----\n{}\n---- {label} (AutoDetect=nvml) ----\n{}",
                want.normalized(),
                got.normalized()
            );
            assert!(got.normalized().contains("gpu/nvml: 3 GPU system device(s) detected"), "{label}\n{}", got.normalized());
            assert!(got_lines.iter().any(|l| l.contains("Type=nvidia_a100_1g.10gb")), "{got_lines:#?}");
        }
    }

    /// `AutoDetect=full` (26.05 on): slurmd's core tries the gpu plugins in
    /// turn, asking each for its GPUs and unloading it again until one finds
    /// some, then falls back to gpu/generic with detection off
    /// (`_gpu_plugin_init_full`, src/interfaces/gpu.c), so our gpu_nvml.so's
    /// init, GPU list and fini run in one start and must be safe to repeat.
    /// Without a driver ours must end as stock (Debian's 26.05.5 slurmd, with
    /// no gpu_nvml.so, logs "We were configured to autodetect nvml
    /// functionality, but we weren't able to find that lib"); with one, our
    /// gpu_nvml.so is chosen and the node gets what `AutoDetect=nvml` gives
    /// it (which `autodetect_nvml_matches_fake_gpus_conf` compares with
    /// stock).  Before 26.05 the value does not exist and ours ends as stock
    /// does in both cases.
    fn autodetect_full_ends_as_stock(bed) {
        let full = bed.ours_behaviour().autodetect_full;
        let node = |plugins: PluginSet, autodetect: &str, env: Vec<(String, String)>| {
            let conf = format!("AutoDetect={autodetect}\nName=gpu File={{DEV}}/nvidia[0-1]\n");
            let mut c = ClusterConfig::gpus(plugins, 2).with_cpus(1, 2, 1).with_gres("gpu:2", &conf).with_binds(standin::chroot_binds());
            c.debug_gres = true;
            c.slurmd_debug = "debug2".into();
            c.gres_types = "gpu".into();
            c.slurmd_env = env;
            c
        };
        let ours = |autodetect: &str, env: Vec<(String, String)>| {
            let cfg = bed.ours_config(node(PluginSet::Ours, autodetect, env).with_test_build(), "autodetect_full_ends_as_stock")?;
            let g = Cluster::slurmd_g(&cfg);
            g.assert_ours_loaded(&["gres_gpu"]);
            assert!(!g.normalized().contains("internal error (panic)"), "{}", g.normalized());
            Some(g)
        };
        let lib = ("LD_LIBRARY_PATH".to_string(), standin::library_dir().to_string_lossy().into_owned());
        let fixture = ("GRES_RS_NVML_FIXTURE".to_string(), standin::fixture("slurmd_node.conf").to_string_lossy().into_owned());
        let minors = ("GRES_RS_MIG_MINORS".to_string(), standin::fixture("mig-minors").to_string_lossy().into_owned());
        // No driver: the stand-in without a fixture fails nvmlInit.
        let want = Cluster::slurmd_g(&node(PluginSet::Stock, "full", vec![lib.clone()]));
        let Some(got) = ours("full", vec![lib.clone()]) else { return };
        let show = format!("no driver\n---- stock ----\n{}\n---- ours ----\n{}", want.normalized(), got.normalized());
        assert_eq!(got.output.ok(), want.output.ok(), "{show}");
        assert_eq!(gpu_lines(&got), gpu_lines(&want), "{show}");
        assert!(gpu_lines(&want).iter().any(|l| l.starts_with("Gres Name=gpu") && l.contains("Count=2")), "{show}");

        // A driver that answers with the fixture's GPUs.
        let env = vec![lib, fixture, minors];
        let Some(got) = ours("full", env.clone()) else { return };
        let want = if full { ours("nvml", env.clone()) } else { Some(Cluster::slurmd_g(&node(PluginSet::Stock, "full", env))) };
        let Some(want) = want else { return };
        let show = format!("driver\n---- {} ----\n{}\n---- ours, full ----\n{}", if full { "ours, nvml" } else { "stock" }, want.normalized(), got.normalized());
        assert_eq!(got.output.ok(), want.output.ok(), "{show}");
        assert_eq!(gpu_lines(&got), gpu_lines(&want), "{show}");
        if full {
            assert!(got.normalized().contains("gpu/nvml: 3 GPU system device(s) detected"), "{show}");
            assert!(got.normalized().contains("/gpu_nvml.so"), "our gpu_nvml.so was not loaded: {show}");
        }
    }

    /// MIG device types, and every other field of the records, as the
    /// release's own stock gpu/nvml gives them on the same NVML
    /// (`mig_profiles.conf`: compute-instance profiles, `+me`, memory below
    /// the nominal size, a device NVML cannot name), `slurmd -G` of stock
    /// gpu/nvml + gres/gpu against all of ours.  The stock plugin reads
    /// the driver's `/proc/driver/nvidia-caps/mig-minors` only: the
    /// fixture's is mounted there for slurmd (`MIG_MINORS_ENV`: in its
    /// chroot, or its own mount namespace on the host).
    fn mig_types_as_stock_gpu_nvml(bed) {
        let name = format!("mig_types_as_stock_gpu_nvml [Slurm {}]", bed.version);
        let Some(stock_nvml) = bed.stock_gpu_nvml_for("mig_types_as_stock_gpu_nvml") else { return };
        // Typed (slurmd keeps the detected types only then), with the
        // types this release's gpu/nvml gives (`tests/nvml_detect.rs`).
        let types: &[&str] = if bed.ours_behaviour().mig_type_from_nvml_name {
            &["nvidia_a100_1c.3g.20gb", "nvidia_a100_2c.3g.20gb", "nvidia_a100_2g.10gb", "nvidia_a100_1g.5gb+me", "nvidia_h100_80gb_hbm3_7g.80gb", "nvidia_h100_80gb_hbm3_2c.3g.40gb"]
        } else {
            &["nvidia_a100_3g.20gb:2", "nvidia_a100_2g.10gb", "nvidia_a100_1g.5gb", "nvidia_h100_80gb_hbm3_7g.79gb", "nvidia_h100_80gb_hbm3_3g.40gb"]
        };
        let gres: Vec<String> = types.iter().map(|t| if t.contains(':') { format!("gpu:{t}") } else { format!("gpu:{t}:1") }).collect();
        let gres = gres.join(",");
        let node = |plugins: PluginSet| {
            let mut c = ClusterConfig::gpus(plugins, 0).with_cpus(1, 2, 1).with_gres(&gres, "AutoDetect=nvml\n").with_binds(standin::chroot_binds());
            c.debug_gres = true;
            c.slurmd_debug = "debug2".into();
            c.gres_types = "gpu".into();
            c.slurmd_env = standin::daemon_env(&standin::fixture("mig_profiles.conf"));
            c.slurmd_env.push((gres_test_harness::MIG_MINORS_ENV.into(), standin::fixture("mig-minors").to_string_lossy().into_owned()));
            bed.on(c)
        };
        let stock = ClusterConfig { extra_stock_plugins: vec![stock_nvml], ..node(PluginSet::Stock) };
        let want = Cluster::slurmd_g(&stock);
        let Some(ours) = bed.ours_config(node(PluginSet::Ours), "mig_types_as_stock_gpu_nvml") else { return };
        let got = Cluster::slurmd_g(&ours);
        got.assert_ours_loaded(&["gres_gpu"]);
        let show = format!("---- stock gpu/nvml ----\n{}\n---- ours ----\n{}", want.normalized(), got.normalized());
        let (want_lines, got_lines) = (gpu_lines(&want), gpu_lines(&got));
        eprintln!("{name}:\n{}", want_lines.join("\n"));
        assert!(want.normalized().contains("3 GPU system device(s) detected"), "stock gpu/nvml did not detect:\n{show}");
        assert_eq!(as_stock_mig_links(bed, &got_lines), sorted(&want_lines), "{show}");
        let profile = if bed.ours_behaviour().mig_type_from_nvml_name { "nvidia_a100_1c.3g.20gb" } else { "nvidia_a100_3g.20gb" };
        assert!(got_lines.iter().any(|l| l.contains(profile)), "{show}");
    }

    /// `fake_gpus.conf` CPU masks (`~one`, `~three`, an unknown keyword)
    /// go to the gpu plugin's `test_cpu_conv`, which prints each mask's
    /// words on slurmd's stdout (Slurm's own tests read them there) and
    /// returns the CPU range: with ours, stdout and the GPUs of `slurmd -G`
    /// are stock gpu/nvml's.
    fn fake_gpus_cpu_masks_as_stock_gpu_nvml(bed) {
        let name = format!("fake_gpus_cpu_masks_as_stock_gpu_nvml [Slurm {}]", bed.version);
        let Some(stock_nvml) = bed.stock_gpu_nvml_for("fake_gpus_cpu_masks_as_stock_gpu_nvml") else { return };
        let node = |plugins: PluginSet| {
            let mut c = ClusterConfig::gpus(plugins, 3).with_cpus(1, 2, 1).with_gres("gpu:3", "AutoDetect=nvml\n").with_binds(standin::chroot_binds());
            c.fake_gpus_conf =
                Some("nvidia_h100|2|~one|-1,0,0|{DEV}/nvidia0\nnvidia_h100|2|~three|0,-1,0|{DEV}/nvidia1\nnvidia_h100|2|~bogus|0,0,-1|{DEV}/nvidia2\n".into());
            c.slurmd_env = standin::daemon_env(&standin::fixture("h100x2.conf"));
            bed.on(c)
        };
        let stock = ClusterConfig { extra_stock_plugins: vec![stock_nvml], ..node(PluginSet::Stock) };
        let want = Cluster::slurmd_g(&stock);
        let Some(ours) = bed.ours_config(node(PluginSet::Ours), "fake_gpus_cpu_masks_as_stock_gpu_nvml") else { return };
        let got = Cluster::slurmd_g(&ours);
        // 22.05's slurmd loads its gpu plugin for nothing but the `~`
        // masks here, which our gres/gpu converts as gpu/nvml does
        // without it: stdout and the GPUs below are the proof.
        got.assert_ours_loaded(if bed.series == "22.05" { &["gres_gpu"] } else { &["gres_gpu", "gpu_nvml"] });
        let show = format!("---- stock gpu/nvml ----\n{}\n---- ours ----\n{}", want.normalized(), got.normalized());
        let masks = |g: &SlurmdG| g.output.stdout.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect::<Vec<_>>();
        let (want_masks, got_masks) = (masks(&want), masks(&got));
        eprintln!("{name}: stdout {} lines, {:?}", want_masks.len(), want_masks.iter().map(|l| l.chars().take(12).collect::<String>()).collect::<Vec<_>>());
        assert_eq!(want_masks.len(), 2, "stock printed a line per known mask:\n{show}");
        assert_eq!(got_masks, want_masks, "{show}");
        assert_eq!(sorted(&gpu_lines(&got)), sorted(&gpu_lines(&want)), "{show}");
        let keyword = |g: &SlurmdG| g.normalized().contains("Unknown test keyword");
        assert!(keyword(&want) && keyword(&got), "{show}");
    }

    /// A hybrid Intel CPU (tests/nvml-standin/fixtures/hybrid-topology.xml
    /// given to slurmd's hwloc: 8 P-cores with 2 threads, 8 E-cores) whose
    /// GPUs NVML ties to all 24 CPUs: slurmd leaves the E-cores out of its
    /// topology from 23.02, and gpu/nvml must cut them from each GPU's
    /// `Cores`, unless `SlurmdParameters=allow_ecores`.  `slurmd -G` with
    /// ours is stock gpu/nvml's, both ways.
    fn ecores_as_stock_gpu_nvml(bed) {
        let name = format!("ecores_as_stock_gpu_nvml [Slurm {}]", bed.version);
        let Some(stock_nvml) = bed.stock_gpu_nvml_for("ecores_as_stock_gpu_nvml") else { return };
        for allow in [false, true] {
            let node = |plugins: PluginSet| {
                let mut c = ClusterConfig::gpus(plugins, 0)
                    .with_cpus(1, 8, 2)
                    .with_gres("gpu:nvidia_rtx_a6000:1,gpu:nvidia_geforce_rtx_4090:1", "AutoDetect=nvml\n")
                    .with_binds(standin::chroot_binds());
                c.debug_gres = true;
                c.slurmd_debug = "debug2".into();
                c.gres_types = "gpu".into();
                if allow {
                    c.extra_slurm_conf.push("SlurmdParameters=config_overrides,allow_ecores".into());
                }
                c.slurmd_env = standin::daemon_env(&standin::fixture("hybrid.conf"));
                c.slurmd_env.push(("HWLOC_XMLFILE".into(), standin::fixture("hybrid-topology.xml").to_string_lossy().into_owned()));
                bed.on(c)
            };
            let stock = ClusterConfig { extra_stock_plugins: vec![stock_nvml.clone()], ..node(PluginSet::Stock) };
            let want = Cluster::slurmd_g(&stock);
            let Some(ours) = bed.ours_config(node(PluginSet::Ours), "ecores_as_stock_gpu_nvml") else { return };
            let got = Cluster::slurmd_g(&ours);
            got.assert_ours_loaded(&["gres_gpu"]);
            let show = format!("allow_ecores={allow}\n---- stock gpu/nvml ----\n{}\n---- ours ----\n{}", want.normalized(), got.normalized());
            let (want_lines, got_lines) = (gpu_lines(&want), gpu_lines(&got));
            eprintln!("{name} allow_ecores={allow}:\n{}", want_lines.join("\n"));
            assert!(want.normalized().contains("2 GPU system device(s) detected"), "stock gpu/nvml did not detect:\n{show}");
            assert!(want_lines.iter().any(|l| l.contains("Gres Name=gpu")), "stock gpu/nvml reported no GPU:\n{show}");
            // slurmd read the hybrid topology (and, from 23.02, left the
            // E-cores out): CoreCnt is the count of CPUs it found.
            let ecores_out = !allow && bed.ours_behaviour().gpu_affinity_enabled_cpus;
            let cpus = if ecores_out { "CoreCnt=16 " } else { "CoreCnt=24 " };
            assert!(want_lines.iter().chain(&got_lines).all(|l| !l.contains("Gres Name=") || l.contains(cpus)), "slurmd did not see the hybrid CPU ({cpus}):\n{show}");
            assert_eq!(sorted(&got_lines), sorted(&want_lines), "{show}");
            if ecores_out {
                assert!(got_lines.iter().any(|l| l.contains("Cores=0-7")), "the GPUs keep the P-cores:\n{show}");
            }
        }
    }

    /// From 24.11 slurmctld refuses a node whose GPU cores split a socket,
    /// and words the reason by whether the GPU's record was autodetected
    /// (`GRES_CONF_AUTODETECT`, which gpu/nvml sets): the drain reason with
    /// ours is stock gpu/nvml's.  Two H100s with one CPU each on one
    /// socket of two cores.
    fn drain_reason_names_autodetected_cores(bed) {
        let name = format!("drain_reason_names_autodetected_cores [Slurm {}]", bed.version);
        if !bed.ours_behaviour().autodetect_conf_flag {
            eprintln!("{name}: no GRES_CONF_AUTODETECT before 24.11; nothing to compare");
            return;
        }
        let Some(stock_nvml) = bed.stock_gpu_nvml_for("drain_reason_names_autodetected_cores") else { return };
        let node = |plugins: PluginSet| {
            let mut c = ClusterConfig::gpus(plugins, 0).with_cpus(1, 2, 1).with_gres("gpu:nvidia_h100_80gb_hbm3:2", "AutoDetect=nvml\n").with_binds(standin::chroot_binds());
            c.gres_types = "gpu".into();
            c.wait_idle = false;
            c.slurmd_env = standin::daemon_env(&standin::fixture("h100x2.conf"));
            bed.on(c)
        };
        let reason = |c: &Cluster| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                // The whole reason (it has spaces), without the user and
                // time slurmctld appends.
                let out = c.scontrol(&["-o", "show", "node"]);
                let r = out.stdout.split_once(" Reason=").map(|(_, r)| r.split(" [").next().unwrap_or_default().trim().to_string()).unwrap_or_default();
                if r.contains("socket") || std::time::Instant::now() > deadline {
                    return r;
                }
                std::thread::sleep(std::time::Duration::from_millis(300));
            }
        };
        let stock = Cluster::start(ClusterConfig { extra_stock_plugins: vec![stock_nvml], ..node(PluginSet::Stock) });
        let want = reason(&stock);
        drop(stock);
        let Some(cfg) = bed.ours_config(node(PluginSet::Ours), "drain_reason_names_autodetected_cores") else { return };
        let ours = Cluster::start(cfg);
        ours.assert_ours_loaded(&["gres_gpu"]);
        let got = reason(&ours);
        eprintln!("{name}: {want}");
        assert!(want.contains("autodetected"), "stock: {want}\n{}", ours.log_tails(20));
        assert_eq!(got, want, "{}", ours.log_tails(40));
    }

    fn no_driver_keeps_configured_gpus(bed) {
        let conf = "AutoDetect=nvml\nName=gpu File={DEV}/nvidia[0-1]\n";
        let mut stock = ClusterConfig::gpus(PluginSet::Stock, 2).with_cpus(1, 2, 1).with_gres("gpu:2", conf).with_binds(standin::chroot_binds());
        stock.debug_gres = true;
        let want = Cluster::slurmd_g(&stock);

        // The stand-in without a fixture fails nvmlInit as without a driver.
        let Some(mut ours) = bed.ours_config(stock.clone().with_plugins(PluginSet::OursOnly(vec!["gpu_nvml".into()])), "no_driver_keeps_configured_gpus") else {
            return;
        };
        ours.slurmd_env = vec![("LD_LIBRARY_PATH".into(), standin::library_dir().to_string_lossy().into_owned())];
        let got = Cluster::slurmd_g(&ours);
        got.assert_ours_loaded(&["gpu_nvml"]);

        let (want_lines, got_lines) = (gpu_lines(&want), gpu_lines(&got));
        assert_eq!(want_lines.len(), 2, "{}", want.normalized());
        assert_eq!(got_lines, want_lines, "\n---- stock ----\n{}\n---- ours ----\n{}", want.normalized(), got.normalized());
        assert!(got.normalized().contains("Failed to initialize NVML: Driver Not Loaded"), "{}", got.normalized());
    }

    /// `srun --gpu-freq`: slurmstepd hands the step's GPUs to the gpu
    /// plugin, which sets their clocks and puts the defaults back when the
    /// step ends (seen in the stand-in's call log): application clocks up
    /// to 25.11, locked clocks from 26.05.  The same calls as the release's
    /// stock gpu/nvml.  Our gpu_nvml.so proven loaded
    /// in slurmd ([`Cluster::assert_ours_gpu_plugin_loaded`]: by its maps,
    /// or where slurmd unloads the gpu plugin by our init line) and in the
    /// step's slurmstepd by its maps.
    fn gpu_freq_sets_and_resets_step_clocks(bed) {
        // The clock calls and the step's stderr of `srun --gpu-freq` on a
        // node of two H100s, with `plugins`.
        let run = |plugins: PluginSet, stock_nvml: Option<std::path::PathBuf>| -> Option<(Vec<String>, String)> {
            // One log per release and side: the releases' tests run at once.
            let calls = standin::scratch_dir().join(format!("cluster-calls-{}-{}.log", bed.series, stock_nvml.is_some()));
            let _ = std::fs::remove_file(&calls);
            // One core per socket, so that each GPU's affinity (one CPU,
            // from the fixture) is a whole socket: from 24.11 slurmctld
            // drains a node whose GPU cores are part of a socket
            // (src/interfaces/gres.c `_check_core_range_matches_sock`).
            let c = ClusterConfig::gpus(plugins, 0).with_cpus(2, 1, 1).with_gres("gpu:nvidia_h100_80gb_hbm3:2", "AutoDetect=nvml\n").with_binds(standin::chroot_binds());
            let mut c = match &stock_nvml {
                Some(p) => ClusterConfig { extra_stock_plugins: vec![p.clone()], ..bed.on(c) },
                None => bed.ours_config(c, "gpu_freq_sets_and_resets_step_clocks")?,
            };
            c.slurmd_env = standin::daemon_env(&standin::fixture("h100x2.conf"));
            c.slurmd_env.push(("GRES_RS_NVML_CALLS".into(), calls.to_string_lossy().into_owned()));
            let cluster = Cluster::start(c);
            if stock_nvml.is_none() {
                cluster.assert_ours_gpu_plugin_loaded("gpu_nvml");
            }
            let out = cluster.srun(&["--gres=gpu:2", "--gpu-freq=low,memory=high,verbose", "true"]);
            assert!(out.ok(), "{out}\n{}", cluster.log_tails(40));
            let log = std::fs::read_to_string(&calls).unwrap_or_default();
            let lines = log.lines().filter(|l| l.contains("ApplicationsClocks") || l.contains("LockedClocks")).map(str::to_string).collect();
            if stock_nvml.is_none() {
                // slurmstepd loads the gpu plugin for a step with `--gpu-freq`.
                cluster.assert_stepd_ours_loaded(&["gpu_nvml"], &["--gres=gpu:1", "--gpu-freq=high"]);
            }
            let _ = std::fs::remove_file(&calls);
            Some((lines, out.stderr))
        };
        let Some((got, stderr)) = run(PluginSet::OursOnly(vec!["gpu_nvml".into()]), None) else { return };
        // `verbose`: the first GPU's clocks on the step's stderr, as Slurm does.
        assert!(stderr.contains("GpuFreq=memory_freq:2619,graphics_freq:345"), "{stderr}");
        let Some(stock_nvml) = bed.stock_gpu_nvml_for("gpu_freq_sets_and_resets_step_clocks") else { return };
        let (want, stock_stderr) = run(PluginSet::Stock, Some(stock_nvml)).expect("the stock side always runs");
        assert!(!want.is_empty(), "stock set no clocks:\n{stock_stderr}");
        assert_eq!(got, want, "clock calls, ours vs stock gpu/nvml");
        assert!(stock_stderr.contains("GpuFreq=memory_freq:2619,graphics_freq:345"), "{stock_stderr}");
    }
}
