//! The nodes' evaluation: nodes that read the same lines of both files
//! are evaluated once, each group through gres-predict's pipeline.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use gres_core::behaviour::Behaviour;
use gres_core::devices::{stat_device, DevStat};
use gres_core::fake_gpus::{self, CpuConv};
use gres_core::host::{NodeConfig, StandaloneHost};
use slurm_gpu_gres::config::gres_conf::{AutoDetect, NodeContext};
use slurm_gpu_gres::config::syntax::{ConfError, Location};
use slurm_gpu_gres::predict::slurm_conf::SlurmConf;
use slurm_gpu_gres::predict::{self, CpuMap, NodeInput, Prediction, Problem, Severity};

use super::{Group, NodeEntry, Nodes, Outcome, PluginDirs};
use crate::gres_conf_index::{GresConfIndex, IndexError};
use crate::host::{self, LocalCpus};
use crate::plugin_dir::GpuPick;
use crate::CheckArgs;

/// The groups of nodes evaluated, and what was read on the way.
pub(super) struct Evaluated {
    pub(super) groups: Vec<Group>,
    /// Syntax errors of gres.conf lines.
    pub(super) syntax: Vec<ConfError>,
    /// The logical lines of gres.conf read for some node.
    pub(super) read: HashSet<usize>,
}

/// What every node's evaluation shares.
pub(super) struct EvalContext<'a> {
    pub(super) slurm: &'a SlurmConf,
    pub(super) types: &'a [String],
    pub(super) index: Option<&'a GresConfIndex>,
    pub(super) fake_path: Option<&'a Path>,
    pub(super) local_cpus: Option<LocalCpus>,
    pub(super) config_overrides: bool,
    pub(super) global_autodetect: Option<Location>,
    pub(super) args: &'a CheckArgs,
    /// How the release checked for reads gres.conf.
    pub(super) behaviour: &'a Behaviour,
    /// The gres/gpu slurmd loads from PluginDir is ours (None: unknown).
    pub(super) ours_gpu: Option<bool>,
    /// This host's PluginDir (None: not looked at).
    pub(super) plugin_dirs: Option<&'a PluginDirs>,
}

impl EvalContext<'_> {
    /// Evaluate the `selected` nodes, once for each set of nodes that read
    /// lines of the same content from both files.
    pub(super) fn evaluate_all(&self, nodes: &Nodes, selected: &[usize], is_local: &dyn Fn(&NodeEntry) -> bool) -> Evaluated {
        let wanted: HashSet<&str> = selected.iter().map(|&i| nodes.entries[i].name.as_str()).collect();
        let node_lines = self.index.map(|s| s.node_lines(&wanted)).unwrap_or_default();
        let no_lines = Vec::new();
        let mut keys: HashMap<(String, usize, bool), usize> = HashMap::new();
        let mut members: Vec<(Vec<usize>, &Vec<usize>)> = Vec::new();
        for &i in selected {
            let e = &nodes.entries[i];
            let lines = node_lines.get(&e.name).unwrap_or(&no_lines);
            let content = match self.index {
                Some(s) => s.content_key(lines).unwrap_or_else(|| format!("{lines:?}")),
                None => String::new(),
            };
            let g = *keys.entry((content, e.line, is_local(e))).or_insert_with(|| {
                members.push((Vec::new(), lines));
                members.len() - 1
            });
            members[g].0.push(i);
        }
        let mut out = Evaluated { groups: Vec::new(), syntax: Vec::new(), read: HashSet::new() };
        if let Some(s) = self.index {
            // Lines of nodes evaluated through another node with the same
            // content count as read: their text is the same.
            out.read.extend(s.chosen(&[]));
            out.read.extend(node_lines.values().flatten().copied());
        }
        for (nodes_of, lines) in members {
            let first = &nodes.entries[nodes_of[0]];
            let (outcome, syntax) = self.evaluate(first, lines, is_local(first));
            out.syntax.extend(syntax);
            out.groups.push(Group { outcome, nodes: nodes_of });
        }
        out
    }

    fn evaluate(&self, entry: &NodeEntry, lines: &[usize], local: bool) -> (Outcome, Vec<ConfError>) {
        let line = &self.slurm.nodes()[entry.line];
        let (hw, mut problems) = predict::node_hw(line);
        let actual = if local { self.local_cpus.map(|c| (c.cpus, c.cores)) } else { None };
        let cpus = hw.cpus.max(actual.map_or(0, |(c, _)| c));
        let map = CpuMap::for_node(&hw, actual, self.config_overrides);
        let abs_to_mac = move |r: &str| map.abs_to_mac(r);
        let ctx = NodeContext { node_name: &entry.name, cpu_cnt: cpus, gres_types: Some(self.types), abs_to_mac: Some(&abs_to_mac), behaviour: self.behaviour };
        let mut outcome = Outcome { cpus, local, origin: String::new(), prediction: Prediction::default(), problems: Vec::new() };
        let gres_node = match self.index.map(|s| s.node_config(lines, &ctx)) {
            None => None,
            Some(Ok(g)) => Some(g),
            Some(Err(IndexError::Node(e))) => {
                problems.push(Problem::from_conf_error(&e));
                outcome.problems = problems;
                return (outcome, Vec::new());
            }
            Some(Err(IndexError::Syntax(errors))) => return (outcome, errors),
        };
        let gres_value = line.gres();
        let (slurm_gres, gres_problems) = predict::node_slurm_gres(&entry.name, gres_value.map(|g| (g.value.as_str(), &g.location)), self.types);
        problems.extend(gres_problems);
        let autodetect = gres_node.as_ref().map_or(AutoDetect::Unset, |g| g.autodetect);
        let mut system = None;
        if let Some(path) = self.fake_path {
            let conv = if autodetect == AutoDetect::Nvml { CpuConv::Nvml } else { CpuConv::Unsupported };
            match fake_gpus::load_fake_gpus(path, conv) {
                Ok(Some(fake)) => {
                    problems.extend(fake.diagnostics.iter().map(Problem::from_diagnostic));
                    system = Some(fake.records);
                }
                Ok(None) => {}
                Err(e) => {
                    problems.push(Problem::new(Severity::Fatal, None, e.to_string()));
                    outcome.problems = problems;
                    return (outcome, Vec::new());
                }
            }
        } else if local && matches!(autodetect, AutoDetect::Nvml | AutoDetect::Full) && !self.args.no_detect {
            // AutoDetect=full probes gpu/nvml first.
            system = slurm_gpu_gres::nvml::system_gpu_list(
                &StandaloneHost::new(*self.behaviour),
                NodeConfig { cpu_cnt: cpus, in_slurmd: true },
                &Default::default(),
            );
        }
        // The gpu plugin slurmd picks on this host, and the file it loads.
        let gpu_pick = if local { crate::plugin_dir::gpu_plugin(autodetect, self.behaviour, &host::library_loadable) } else { None };
        let mut gpu_loads = None;
        let gres_gpu = self.types.iter().any(|t| t.eq_ignore_ascii_case("gpu"));
        if let (Some(pick), Some(dirs), true) = (&gpu_pick, self.plugin_dirs, gres_gpu) {
            let choice = dirs.predict(&[pick.name]).remove(0);
            gpu_loads = Some(choice.loaded.is_some());
            problems.extend(crate::plugin_dir::gpu_problems(pick, &choice, &dirs.text, self.slurm));
        }
        if self.fake_path.is_none() {
            problems.extend(self.autodetect_problems(autodetect, local, system.is_some(), gpu_pick.as_ref(), gpu_loads));
        }
        let detection_pending = !local
            && system.is_none()
            && matches!(autodetect, AutoDetect::Nvml | AutoDetect::Rsmi | AutoDetect::OneApi | AutoDetect::Nrt | AutoDetect::Nvidia | AutoDetect::Full);
        let configured = if gres_node.is_some() { "gres.conf" } else { "slurm.conf (no gres.conf)" };
        let gpus = |n: usize| if n == 1 { "1 GPU".to_string() } else { format!("{n} GPUs") };
        outcome.origin = match &system {
            Some(s) if self.fake_path.is_some() => format!("{} from fake_gpus.conf, merged with {configured}", gpus(s.len())),
            Some(s) => format!("{} detected by NVML on this host, merged with {configured}", gpus(s.len())),
            None if detection_pending => format!("from {configured}; detection (AutoDetect={}) runs on the node, not here", autodetect.as_str()),
            None if local && matches!(autodetect, AutoDetect::Nvml | AutoDetect::Full) && self.args.no_detect => {
                format!("from {configured}; NVML not asked (--no-detect)")
            }
            None if local && matches!(autodetect, AutoDetect::Nvml | AutoDetect::Full) => format!("from {configured}; NVML detected nothing"),
            None => format!("from {configured}"),
        };
        let stat = |p: &str| -> Result<DevStat, String> { stat_device(p) };
        let device_check = local && !self.args.no_device_check;
        let mut prediction = predict::predict(NodeInput {
            gres_types: self.types,
            slurm: Some(&slurm_gres),
            cpu_cnt: cpus,
            gres_conf: gres_node.as_ref(),
            system_gpus: system,
            fake_gpus: self.fake_path.is_some(),
            stat: device_check.then_some(&stat as &dyn Fn(&str) -> Result<DevStat, String>),
        });
        // The GRES lines as the release checked for writes them (23.02+:
        // `Links=... Flags=...`).
        prediction.lines = prediction.records.iter().map(|r| predict::slurmd_line_as(r, self.behaviour)).collect();
        // slurmd's log lines are not shown (problems are); with many nodes
        // they would only take memory.
        prediction.log = Vec::new();
        problems.extend(std::mem::take(&mut prediction.problems));
        if problems.iter().all(|p| p.severity != Severity::Fatal) {
            problems.extend(predict::registration_problems(&slurm_gres, &prediction.records, gres_value.map(|g| &g.location), detection_pending));
        }
        if let Some((mut mismatch, name)) = gres_node.as_ref().and_then(|g| predict::type_mismatch(&slurm_gres, g, gres_value.map(|v| &v.location))) {
            if problems.iter().any(|p| predict::follows_from_type_mismatch(p, &name) && p.message.contains("drains the node")) {
                mismatch.message.push_str(", and slurmctld drains it");
            }
            problems.retain(|p| !predict::follows_from_type_mismatch(p, &name));
            problems.push(mismatch);
        }
        if !local && !self.args.no_device_check && prediction.records.iter().any(|r| r.file.is_some()) {
            problems.push(Problem::new(Severity::Note, None, format!("device files not checked: {} is not this host", entry.name)));
        }
        outcome.prediction = prediction;
        outcome.problems = problems;
        (outcome, Vec::new())
    }

    /// `pick`: the gpu plugin slurmd picks here (None: not predicted);
    /// `gpu_loads`: whether a file of it is accepted (None: not looked at).
    fn autodetect_problems(&self, autodetect: AutoDetect, local: bool, detected: bool, pick: Option<&GpuPick>, gpu_loads: Option<bool>) -> Vec<Problem> {
        let mut out = Vec::new();
        let energy_gpu = self.slurm.get("AcctGatherEnergyType").is_some_and(|v| v.trim().eq_ignore_ascii_case("acct_gather_energy/gpu"));
        // gpu/generic: what slurmd falls back to, which reads no energy.
        let generic = pick.is_some_and(|p| !p.is_nvml());
        let nvml_libs = if self.behaviour.nvml_versioned_lib { "libnvidia-ml.so.1" } else { "libnvidia-ml.so (unversioned)" };
        let no_energy = generic || pick.is_some_and(|p| p.is_nvml() && !p.required && gpu_loads == Some(false));
        if local && energy_gpu && no_energy {
            let energy = self.slurm.get_spanned("AcctGatherEnergyType").map(|s| s.location.clone());
            out.push(
                Problem::new(
                    Severity::Warning,
                    energy,
                    "AcctGatherEnergyType=acct_gather_energy/gpu, but slurmd will use gpu/generic, which reads no energy: jobs' GPU energy stays 0",
                )
                .with_help(format!("energy needs gpu/nvml: AutoDetect=nvml in gres.conf and the driver's {nvml_libs} loadable")),
            );
        }
        match autodetect {
            AutoDetect::Nvml if local && !host::library_loadable(slurm_gpu_gres::nvml::DEFAULT_LIB) => out.push(
                Problem::new(
                    Severity::Warning,
                    self.global_autodetect.clone(),
                    format!("AutoDetect=nvml, but there is no NVIDIA driver here ({} missing): NVML detects no GPU", slurm_gpu_gres::nvml::DEFAULT_LIB),
                )
                .with_help("install the NVIDIA driver, or list the GPUs with File= in gres.conf"),
            ),
            AutoDetect::Nvml if local && generic && self.ours_gpu == Some(true) => out.push(
                Problem::new(
                    Severity::Warning,
                    self.global_autodetect.clone(),
                    "AutoDetect=nvml: our gres/gpu detects the GPUs through libnvidia-ml.so.1, but slurmd picks gpu/generic (libnvidia-ml.so, unversioned, cannot be loaded), so --gpu-freq and acct_gather_energy/gpu have no gpu/nvml",
                )
                .with_help("install the driver's development link (Debian: apt install libnvidia-ml-dev, or ln -s libnvidia-ml.so.1 libnvidia-ml.so next to it)"),
            ),
            AutoDetect::Nvml if local && generic => out.push(
                Problem::new(
                    Severity::Warning,
                    self.global_autodetect.clone(),
                    "AutoDetect=nvml, but libnvidia-ml.so (unversioned) cannot be loaded here: the stock slurmd falls back to gpu/generic and detects no GPU",
                )
                .with_help("install the driver's development link (Debian: apt install libnvidia-ml-dev, or ln -s libnvidia-ml.so.1 libnvidia-ml.so next to it); gres-rs's gres_gpu.so asks NVML through libnvidia-ml.so.1 itself"),
            ),
            AutoDetect::Nvml if local && !detected && !self.args.no_detect => out.push(Problem::new(
                Severity::Warning,
                self.global_autodetect.clone(),
                "AutoDetect=nvml, but NVML reports no GPU on this host (see `gres-rs detect`)",
            )),
            AutoDetect::OneApi => out.push(Problem::new(
                Severity::Warning,
                self.global_autodetect.clone(),
                "AutoDetect=oneapi: this Slurm build has no gpu/oneapi plugin, slurmd uses gpu/generic and detects no GPU",
            )),
            _ => {}
        }
        out
    }
}
