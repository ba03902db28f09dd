//! `--gpu-freq` on a step's GPUs: the nearest supported memory and
//! graphics clocks become the GPUs' application clocks (26.05: locked
//! clocks, each set only when asked for), and the defaults come back at
//! the end of the step.

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
    /// Memory and graphics clocks are set as locked clocks, each only when
    /// asked for, and both locks are released at the end (26.05's
    /// gpu/nvml built against an NVML that has them); otherwise as one
    /// pair of application clocks.
    pub locked: bool,
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
        StepFreqContext { freq_def: Some(gpu_freq::DEFAULT_GPU_FREQ_DEF.to_string()), keep_current: false, locked: false, local_ids: false, debug_gres: false }
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

/// The current clock (0 when NVML cannot tell): the application clock,
/// or with locked clocks the clock itself (`nvmlDeviceGetClockInfo`).
fn current_clock(s: &Session, dev: &Device<'_>, clock: Clock, ctx: &StepFreqContext, log: &mut Log) -> u32 {
    let what = if clock == Clock::Memory { "memory" } else { "graphics" };
    let got = if ctx.locked { dev.clock_info(clock) } else { dev.applications_clock(clock) };
    got.unwrap_or_else(|e| {
        log.error(format_args!("_nvml_get_freq: Failed to get the GPU {what} frequency: {}", s.text(&e)));
        0
    })
}

/// The debug2 lines with the current memory and graphics clocks.
fn log_clocks(s: &Session, dev: &Device<'_>, when: &str, ctx: &StepFreqContext, log: &mut Log) {
    let mem = current_clock(s, dev, Clock::Memory, ctx, log);
    log.debug2(format_args!("Memory frequency {when}: {mem}"));
    let gfx = current_clock(s, dev, Clock::Graphics, ctx, log);
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
    let mem = mem.unwrap_or_else(|| FreqRequest::Mhz(current_clock(s, dev, Clock::Memory, ctx, log)));
    let gfx = gfx.unwrap_or_else(|| FreqRequest::Mhz(current_clock(s, dev, Clock::Graphics, ctx, log)));
    let mems = supported_memory_clocks(s, dev, log)?;
    let mem = choose(mem, &mems, ctx, log)?;
    let gfxs = supported_graphics_clocks(s, dev, mem, log)?;
    let gfx = choose(gfx, &gfxs, ctx, log)?;
    Some((mem, gfx))
}

/// The locked clocks to set on `dev`, each only where asked for (`None`
/// otherwise); the graphics clock among those at the chosen memory clock,
/// or at the current one when memory is not asked for.  `None` when a
/// list cannot be read (logged).
fn nearest_locked(
    s: &Session,
    dev: &Device<'_>,
    mem: Option<FreqRequest>,
    gfx: Option<FreqRequest>,
    ctx: &StepFreqContext,
    log: &mut Log,
) -> Option<(Option<u32>, Option<u32>)> {
    let mems = supported_memory_clocks(s, dev, log)?;
    let mem = match mem {
        Some(m) => Some(choose(m, &mems, ctx, log)?),
        None => None,
    };
    let at = mem.unwrap_or_else(|| current_clock(s, dev, Clock::Memory, ctx, log));
    let gfxs = supported_graphics_clocks(s, dev, at, log)?;
    let gfx = match gfx {
        Some(g) => Some(choose(g, &gfxs, ctx, log)?),
        None => None,
    };
    Some((mem, gfx))
}

/// Set the clocks `nearest_locked` chose as locked clocks; whether all
/// were set (each failure logged as stock logs it).
fn set_locked(s: &Session, dev: &mut Device<'_>, mem: Option<u32>, gfx: Option<u32>, log: &mut Log) -> bool {
    use nvml_wrapper::enums::device::GpuLockedClocksSetting;
    let mut ok = true;
    if let Some(m) = mem {
        if let Err(e) = dev.set_mem_locked_clocks(m, m) {
            log.error(format_args!("_nvml_set_freqs: Failed to set memory clock frequency ({m}) for the GPU: {}", s.text(&e)));
            ok = false;
        }
    }
    if let Some(g) = gfx {
        if let Err(e) = dev.set_gpu_locked_clocks(GpuLockedClocksSetting::Numeric { min_clock_mhz: g, max_clock_mhz: g }) {
            log.error(format_args!("_nvml_set_freqs: Failed to set GPU clock frequency ({g}) for the GPU: {}", s.text(&e)));
            ok = false;
        }
    }
    ok
}

/// Release both locks of `dev`; a device that has no such lock
/// (`NotSupported`) counts as reset.
fn reset_locked(s: &Session, dev: &mut Device<'_>, log: &mut Log) -> bool {
    use nvml_wrapper::error::NvmlError;
    let mut ok = true;
    match dev.reset_mem_locked_clocks() {
        Ok(()) => {}
        Err(NvmlError::NotSupported) => log.debug2("Could not reset memory clock, not supported by device."),
        Err(e) => {
            log.error(format_args!("_nvml_reset_freqs: Failed to reset memory frequencies to the hardware default: {}", s.text(&e)));
            ok = false;
        }
    }
    match dev.reset_gpu_locked_clocks() {
        Ok(()) => {}
        Err(NvmlError::NotSupported) => log.debug2("Could not reset GPU clock, not supported by device."),
        Err(e) => {
            log.error(format_args!("_nvml_reset_freqs: Failed to reset GPU frequencies to the hardware default: {}", s.text(&e)));
            ok = false;
        }
    }
    ok
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
        (m, g) if ctx.keep_current || ctx.locked => (m, g),
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
        let chosen = if ctx.locked {
            nearest_locked(&s, &dev, mem_req, gfx_req, ctx, log)
        } else {
            nearest_pair(&s, &dev, mem_req, gfx_req, ctx, log).map(|(m, g)| (Some(m), Some(g)))
        };
        let Some((mem, gfx)) = chosen else {
            flag_line(ctx, log, format!("Failed to set GPU[{i}] (no supported clocks)"));
            continue;
        };
        log_clocks(&s, &dev, "before set", ctx, log);
        let ok = if ctx.locked {
            set_locked(&s, &mut dev, mem, gfx, log)
        } else {
            let (mem, gfx) = (mem.unwrap_or(0), gfx.unwrap_or(0));
            match dev.set_applications_clocks(mem, gfx) {
                Ok(()) => true,
                Err(e) => {
                    log.error(format_args!(
                        "_nvml_set_freqs: Failed to set memory and graphics clock frequency pair ({mem}, {gfx}) for the GPU: {}",
                        s.text(&e)
                    ));
                    false
                }
            }
        };
        log_clocks(&s, &dev, "after set", ctx, log);
        let text = gpu_freq::applied_text(mem.unwrap_or(0), gfx.unwrap_or(0));
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
                log_clocks(&s, &dev, "before reset", ctx, log);
                let ok = if ctx.locked {
                    reset_locked(&s, &mut dev, log)
                } else {
                    match dev.reset_applications_clocks() {
                        Ok(()) => true,
                        Err(e) => {
                            log.error(format_args!("_nvml_reset_freqs: Failed to reset GPU frequencies to the hardware default: {}", s.text(&e)));
                            false
                        }
                    }
                };
                log_clocks(&s, &dev, "after reset", ctx, log);
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
