//! `--gpu-freq` on a step's GPUs: the nearest supported memory and
//! graphics clocks become the GPUs' application clocks, and the defaults
//! come back at the end of the step.

use super::{Log, Paths, Session};
use gres_core::gpu_freq::{self, FreqRequest};
use gres_core::model::Bitmap;
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::Device;

/// What the step's clock setting depends on besides the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepFreqContext {
    /// slurm.conf `GpuFreqDef` (22.05's built-in default is
    /// `high,memory=high`; 23.02 on has none).
    pub freq_def: Option<String>,
    /// A component neither `--gpu-freq` nor `GpuFreqDef` gives (memory or
    /// graphics) keeps the GPU's current application clock (23.02 on,
    /// where slurmd has no built-in `GpuFreqDef`: `--gpu-freq=low` asks for
    /// nothing about memory); otherwise nothing is set without both
    /// (22.05, where the built-in default always gives both).
    pub keep_current: bool,
    /// The step's GPUs are renumbered from 0 (devices constrained by
    /// cgroup.conf and task/cgroup in use): GPU `n` of the step is NVML
    /// device `n`.  Otherwise the bitmap's indexes are NVML indexes.
    pub local_ids: bool,
    /// `DebugFlags=Gres`: log each GPU's outcome at verbose.
    pub debug_gres: bool,
}

impl Default for StepFreqContext {
    /// Slurm 22.05's: the built-in `GpuFreqDef`.
    fn default() -> Self {
        StepFreqContext { freq_def: Some(gpu_freq::DEFAULT_GPU_FREQ_DEF.to_string()), keep_current: false, local_ids: false, debug_gres: false }
    }
}

/// What [`set_step_freqs`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepFreqOutcome {
    /// NVML indexes of the GPUs the step has (to reset at its end).
    pub gpus: Vec<u32>,
    /// How many of them got their clocks set.
    pub set: usize,
    /// Lines Slurm writes to the step's stderr (`GpuFreq=...` with
    /// `verbose`, and a warning when not every GPU was set).
    pub stderr: Vec<String>,
}

/// The current application clock (0 when NVML cannot tell).
fn app_clock(s: &Session, dev: &Device<'_>, clock: Clock, log: &mut Log) -> u32 {
    let what = if clock == Clock::Memory { "memory" } else { "graphics" };
    dev.applications_clock(clock).unwrap_or_else(|e| {
        log.error(format_args!("_nvml_get_freq: Failed to get the GPU {what} frequency: {}", s.text(&e)));
        0
    })
}

/// The debug2 lines with the current memory and graphics clocks.
fn log_clocks(s: &Session, dev: &Device<'_>, when: &str, log: &mut Log) {
    let mem = app_clock(s, dev, Clock::Memory, log);
    log.debug2(format_args!("Memory frequency {when}: {mem}"));
    let gfx = app_clock(s, dev, Clock::Graphics, log);
    log.debug2(format_args!("Graphics frequency {when}: {gfx}"));
}

fn flag_line(ctx: &StepFreqContext, log: &mut Log, m: String) {
    if ctx.debug_gres {
        log.verbose(format_args!("GRES: {m}"));
    }
}

/// Supported memory clocks, highest first.
pub(crate) fn supported_memory_clocks(s: &Session, dev: &Device<'_>, log: &mut Log) -> Option<Vec<u32>> {
    match dev.supported_memory_clocks() {
        Ok(mut v) => {
            gpu_freq::sort_descending(&mut v);
            Some(v)
        }
        Err(e) => {
            log.error(format_args!("_nvml_get_mem_freqs: Failed to get supported memory frequencies for the GPU : {}", s.text(&e)));
            None
        }
    }
}

/// Supported graphics clocks at a memory clock, highest first.
pub(crate) fn supported_graphics_clocks(s: &Session, dev: &Device<'_>, mem: u32, log: &mut Log) -> Option<Vec<u32>> {
    match dev.supported_graphics_clocks(mem) {
        Ok(mut v) => {
            gpu_freq::sort_descending(&mut v);
            Some(v)
        }
        Err(e) => {
            log.error(format_args!("_nvml_get_gfx_freqs: Failed to get supported graphics frequencies for the GPU at mem frequency {mem}: {}", s.text(&e)));
            None
        }
    }
}

fn choose(req: FreqRequest, desc: &[u32], ctx: &StepFreqContext, log: &mut Log) -> Option<u32> {
    let (v, note) = gpu_freq::nearest_freq(req, desc)?;
    match req {
        FreqRequest::Mhz(_) => match note {
            Some(n) => flag_line(ctx, log, n),
            None => log.debug2(format_args!("No change necessary. Freq: {v} MHz")),
        },
        level => log.debug2(format_args!("Frequency GPU_{}: {v} MHz", level.to_string().to_uppercase().replace("HIGHM1", "HIGH_M1"))),
    }
    Some(v)
}

/// The (memory, graphics) clocks to use on `dev` for the requests; a
/// component not asked for is the GPU's current application clock (the
/// nearest supported one of graphics at the chosen memory clock).
fn nearest_pair(s: &Session, dev: &Device<'_>, mem: Option<FreqRequest>, gfx: Option<FreqRequest>, ctx: &StepFreqContext, log: &mut Log) -> Option<(u32, u32)> {
    let mem = mem.unwrap_or_else(|| FreqRequest::Mhz(app_clock(s, dev, Clock::Memory, log)));
    let gfx = gfx.unwrap_or_else(|| FreqRequest::Mhz(app_clock(s, dev, Clock::Graphics, log)));
    let mems = supported_memory_clocks(s, dev, log)?;
    let mem = choose(mem, &mems, ctx, log)?;
    let gfxs = supported_graphics_clocks(s, dev, mem, log)?;
    let gfx = choose(gfx, &gfxs, ctx, log)?;
    Some((mem, gfx))
}

/// Set the application clocks of the step's GPUs from the GPU part of
/// `--gpu-freq` (`high,memory=low`, ...), completed by `GpuFreqDef`, with
/// the NVML library of `paths`.
pub fn set_step_freqs(usable: &Bitmap, spec: &str, ctx: &StepFreqContext, paths: &Paths, log: &mut Log) -> StepFreqOutcome {
    let mut out = StepFreqOutcome::default();
    log.debug2(format_args!("_parse_gpu_freq({spec})"));
    let req = gpu_freq::parse_gpu_freq(Some(spec), ctx.freq_def.as_deref());
    for n in &req.notes {
        log.line(n.level, n.message.clone());
    }
    if req.verbose {
        log.debug2("verbose_flag ON");
    }
    let show = |r: Option<FreqRequest>| r.map(|r| r.to_string()).unwrap_or_else(|| "0".into());
    log.debug2(format_args!("Requested GPU memory frequency: {}", show(req.memory)));
    log.debug2(format_args!("Requested GPU graphics frequency: {}", show(req.graphics)));
    let (mem_req, gfx_req) = match (req.memory, req.graphics) {
        (Some(m), Some(g)) => (Some(m), Some(g)),
        (None, None) => (None, None),
        (m, g) if ctx.keep_current => (m, g),
        _ => (None, None),
    };
    if mem_req.is_none() && gfx_req.is_none() {
        log.debug2("_set_freq: No frequencies to set");
        return out;
    }
    out.gpus = if ctx.local_ids {
        log.debug2("_set_freq: cgroups are configured. Using LOCAL GPU IDs");
        (0..usable.count() as u32).collect()
    } else {
        log.debug2("_set_freq: cgroups are NOT configured. Assuming GLOBAL GPU IDs");
        usable.ones().map(|i| i as u32).collect()
    };
    let Ok(s) = super::session(paths).map_err(|e| log.error(e.to_string())) else {
        return failed_all(out, ctx, log);
    };
    let mut shown = false;
    for &i in &out.gpus {
        let mut dev = match s.nvml.device_by_index(i) {
            Ok(d) => d,
            Err(e) => {
                log.error(format_args!("Failed to get device handle for GPU {i}: {}", s.text(&e)));
                continue;
            }
        };
        log.debug2(format_args!("Setting frequency of NVML device {i}"));
        let Some((mem, gfx)) = nearest_pair(&s, &dev, mem_req, gfx_req, ctx, log) else {
            flag_line(ctx, log, format!("Failed to set GPU[{i}] (no supported clocks)"));
            continue;
        };
        log_clocks(&s, &dev, "before set", log);
        let ok = match dev.set_applications_clocks(mem, gfx) {
            Ok(()) => true,
            Err(e) => {
                log.error(format_args!("_nvml_set_freqs: Failed to set memory and graphics clock frequency pair ({mem}, {gfx}) for the GPU: {}", s.text(&e)));
                false
            }
        };
        log_clocks(&s, &dev, "after set", log);
        let text = gpu_freq::applied_text(mem, gfx);
        if ok {
            flag_line(ctx, log, format!("Successfully set GPU[{i}] {text}"));
            out.set += 1;
        } else {
            flag_line(ctx, log, format!("Failed to set GPU[{i}] {text}"));
        }
        if req.verbose && !shown {
            out.stderr.push(format!("GpuFreq={text}"));
            shown = true;
        }
    }
    if out.set != out.gpus.len() {
        flag_line(ctx, log, format!("_set_freq: Could not set frequencies for all GPUs. Set {}/{} total GPUs", out.set, out.gpus.len()));
        out.stderr.push(format!("Could not set frequencies for all GPUs. Set {}/{} total GPUs", out.set, out.gpus.len()));
    }
    out
}

fn failed_all(mut out: StepFreqOutcome, ctx: &StepFreqContext, log: &mut Log) -> StepFreqOutcome {
    flag_line(ctx, log, format!("_set_freq: Could not set frequencies for all GPUs. Set 0/{} total GPUs", out.gpus.len()));
    out.stderr.push(format!("Could not set frequencies for all GPUs. Set 0/{} total GPUs", out.gpus.len()));
    out
}

/// Put the default application clocks back on the GPUs (NVML indexes) a
/// step had; the number reset.  Lines for the step's stderr are added to
/// `stderr`.
pub fn reset_step_freqs(gpus: &[u32], ctx: &StepFreqContext, paths: &Paths, log: &mut Log, stderr: &mut Vec<String>) -> usize {
    let mut done = 0;
    match super::session(paths) {
        Err(e) => log.error(e.to_string()),
        Ok(s) => {
            for &i in gpus {
                let mut dev = match s.nvml.device_by_index(i) {
                    Ok(d) => d,
                    Err(e) => {
                        log.error(format_args!("Failed to get device handle for GPU {i}: {}", s.text(&e)));
                        continue;
                    }
                };
                log_clocks(&s, &dev, "before reset", log);
                let ok = match dev.reset_applications_clocks() {
                    Ok(()) => true,
                    Err(e) => {
                        log.error(format_args!("_nvml_reset_freqs: Failed to reset GPU frequencies to the hardware default: {}", s.text(&e)));
                        false
                    }
                };
                log_clocks(&s, &dev, "after reset", log);
                if ok {
                    flag_line(ctx, log, format!("Successfully reset GPU[{i}]"));
                    done += 1;
                } else {
                    flag_line(ctx, log, format!("Failed to reset GPU[{i}]"));
                }
            }
        }
    }
    if done != gpus.len() {
        flag_line(ctx, log, format!("_reset_freq: Could not reset frequencies for all GPUs. Set {done}/{} total GPUs", gpus.len()));
        stderr.push(format!("Could not reset frequencies for all GPUs. Set {done}/{} total GPUs", gpus.len()));
    }
    done
}
