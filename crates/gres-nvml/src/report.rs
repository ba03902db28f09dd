//! Detection for people: what NVML reports as a table and as gres.conf
//! lines, with the log of the run.  For a command-line tool.

use super::detect::detect_logged;
use super::session::DetectError;
use super::{Log, Paths};
use gres_core::host::{Host, NodeConfig};
use gres_core::model::{GresRecord, LogLevel, LogLine};

/// The outcome of one detection.
#[derive(Debug)]
pub struct DetectReport {
    /// The NVML library file asked for.
    pub library: String,
    pub driver_version: Option<String>,
    pub nvml_version: Option<String>,
    /// GPUs NVML counted (MIG devices not included).
    pub device_count: u32,
    /// The records slurmd would get, in order.
    pub gpus: Vec<GresRecord>,
    /// Why there is no list at all.
    pub error: Option<DetectError>,
    /// Every log line of the run (debug levels included).
    pub log: Vec<LogLine>,
}

/// Run detection with NVML and the device files where `paths` says (NVML
/// is shut down afterwards).
pub fn detect_report(host: &dyn Host, cfg: NodeConfig, paths: &Paths) -> DetectReport {
    let mut log = Log::default();
    let library = paths.library.to_string_lossy().into_owned();
    let result = detect_logged(host, cfg, paths, &mut log);
    super::release();
    match result {
        Ok(d) => DetectReport {
            library,
            driver_version: d.driver_version,
            nvml_version: d.nvml_version,
            device_count: d.device_count,
            gpus: d.gpus,
            error: None,
            log: log.into_lines(),
        },
        Err(e) => {
            log.error(e.to_string());
            DetectReport { library, driver_version: None, nvml_version: None, device_count: 0, gpus: Vec::new(), error: Some(e), log: log.into_lines() }
        }
    }
}

impl DetectReport {
    /// The error lines of the run.
    pub fn problems(&self) -> Vec<&str> {
        self.log.iter().filter(|l| l.level == LogLevel::Error).map(|l| l.message.as_str()).collect()
    }

    /// A plain-text table: one row per GPU record.
    pub fn table(&self) -> String {
        let head = ["#", "Type", "File", "Cores", "Links", "UniqueId"];
        let rows: Vec<[String; 6]> = self
            .gpus
            .iter()
            .enumerate()
            .map(|(i, g)| {
                [
                    i.to_string(),
                    g.type_name.clone().unwrap_or_else(|| "-".into()),
                    g.file.clone().unwrap_or_else(|| "-".into()),
                    g.cpus.clone().unwrap_or_else(|| "-".into()),
                    g.links.clone().unwrap_or_else(|| "-".into()),
                    g.unique_id.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        let mut width = head.map(str::len);
        for r in &rows {
            for (w, c) in width.iter_mut().zip(r.iter()) {
                *w = (*w).max(c.len());
            }
        }
        let line = |cells: &[&str]| -> String {
            let parts: Vec<String> = cells.iter().zip(width.iter()).map(|(c, w)| format!("{c:<w$}")).collect();
            parts.join("  ").trim_end().to_string()
        };
        let mut out = String::new();
        out.push_str(&format!(
            "NVML library {}; driver {}; NVML {}; {} GPU(s)\n",
            self.library,
            self.driver_version.as_deref().unwrap_or("?"),
            self.nvml_version.as_deref().unwrap_or("?"),
            self.device_count
        ));
        if let Some(e) = &self.error {
            out.push_str(&format!("error: {e}\n"));
            return out;
        }
        out.push_str(&line(&head));
        out.push('\n');
        for r in &rows {
            let cells: Vec<&str> = r.iter().map(String::as_str).collect();
            out.push_str(&line(&cells));
            out.push('\n');
        }
        out
    }

    /// gres.conf lines describing the detected GPUs (what `AutoDetect=nvml`
    /// finds, written out), optionally for `NodeName=`; MIG devices use
    /// `MultipleFiles=`; the UniqueId, which gres.conf has no key for, is
    /// a comment above its line.
    /// The words of this node's slurm.conf line that detection decides,
    /// as `slurmd -C` prints the rest: `Gres=gpu:<type>:<count>,...` (types
    /// in order of first appearance) and `Features=` with each GPU model
    /// word (`a100` of `nvidia_a100-sxm4-80gb`) and `mig` when MIG devices
    /// are among them.  `None` without GPUs.
    pub fn slurm_conf_words(&self) -> Option<String> {
        if self.gpus.is_empty() {
            return None;
        }
        let mut types: Vec<(String, u64)> = Vec::new();
        for g in &self.gpus {
            let t = g.type_name.clone().unwrap_or_default();
            match types.iter_mut().find(|(n, _)| *n == t) {
                Some((_, c)) => *c += g.count.max(1),
                None => types.push((t, g.count.max(1))),
            }
        }
        let gres: Vec<String> = types.iter().map(|(t, c)| if t.is_empty() { format!("gpu:{c}") } else { format!("gpu:{t}:{c}") }).collect();
        let mut features: Vec<String> = Vec::new();
        for (t, _) in &types {
            let model = t.split(['_', '-']).find(|w| w.len() > 1 && w.chars().any(|c| c.is_ascii_digit()) && w.chars().any(|c| c.is_ascii_alphabetic()));
            if let Some(m) = model {
                if !features.iter().any(|f| f == m) {
                    features.push(m.to_string());
                }
            }
        }
        if self.gpus.iter().any(|g| g.flags.has(gres_core::model::ConfFlags::MIG) || g.type_name.as_deref().is_some_and(gres_core::nvml_model::is_mig_type)) {
            features.push("mig".into());
        }
        let mut line = format!("Gres={}", gres.join(","));
        if !features.is_empty() {
            line.push_str(&format!(" Features={}", features.join(",")));
        }
        Some(line)
    }

    pub fn gres_conf_lines(&self, node_name: Option<&str>) -> Vec<String> {
        let mut out = Vec::new();
        for g in &self.gpus {
            if let Some(u) = &g.unique_id {
                out.push(format!("# UniqueId={u}"));
            }
            let mut words = Vec::new();
            if let Some(n) = node_name {
                words.push(format!("NodeName={n}"));
            }
            words.push(format!("Name={}", g.name));
            if let Some(t) = &g.type_name {
                if !t.is_empty() {
                    words.push(format!("Type={t}"));
                }
            }
            if let Some(f) = &g.file {
                if f.contains(',') {
                    words.push(format!("MultipleFiles={f}"));
                } else {
                    words.push(format!("File={f}"));
                }
            } else {
                words.push("Count=1".into());
            }
            if let Some(c) = &g.cpus {
                if !c.is_empty() {
                    words.push(format!("Cores={c}"));
                }
            }
            if let Some(l) = &g.links {
                if !l.is_empty() {
                    words.push(format!("Links={l}"));
                }
            }
            out.push(words.join(" "));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_core::nvml_model::{system_gpu_record, SystemGpu};

    #[test]
    fn renders() {
        let a = system_gpu_record(&SystemGpu {
            cpu_cnt: 4,
            cpus: Some("0-1"),
            file: Some("/dev/nvidia0"),
            type_name: Some("nvidia_h100_80gb_hbm3"),
            links: Some("-1,2"),
            ..Default::default()
        })
        .unwrap();
        let m = system_gpu_record(&SystemGpu {
            cpu_cnt: 4,
            file: Some("/dev/nvidia1,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13"),
            type_name: Some("nvidia_a100_1g.10gb"),
            links: Some("-1"),
            unique_id: Some("MIG-1234"),
            ..Default::default()
        })
        .unwrap();
        let r = DetectReport {
            library: "libnvidia-ml.so.1".into(),
            driver_version: Some("535.104.05".into()),
            nvml_version: Some("12.535.104.05".into()),
            device_count: 2,
            gpus: vec![a, m],
            error: None,
            log: vec![],
        };
        assert_eq!(
            r.gres_conf_lines(Some("n1")),
            vec![
                "NodeName=n1 Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia0 Cores=0-1 Links=-1,2",
                "# UniqueId=MIG-1234",
                "NodeName=n1 Name=gpu Type=nvidia_a100_1g.10gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13 Links=-1",
            ]
        );
        let t = r.table();
        assert!(t.starts_with("NVML library libnvidia-ml.so.1; driver 535.104.05; NVML 12.535.104.05; 2 GPU(s)\n#  Type"), "{t}");
        assert!(t.contains("\n0  nvidia_h100_80gb_hbm3  /dev/nvidia0"), "{t}");
        assert!(t.trim_end().ends_with("MIG-1234"), "{t}");
    }
}
