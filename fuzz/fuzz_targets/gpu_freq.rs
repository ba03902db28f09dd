//! `--gpu-freq`: the request parser with `GpuFreqDef`, the TRES frequency
//! split, the choice of a supported clock and the clock listing.
//!
//! Input: `<tres freq or job value>\n<GpuFreqDef>\n<supported clocks as
//! u32 little-endian words>`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use gres_core::gpu_freq::{applied_text, freq_listing, gpu_part_of_tres_freq, nearest_freq, parse_gpu_freq, sort_descending, FreqRequest};

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == b'\n');
    let job = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let def = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let clocks: Vec<u32> = parts.next().unwrap_or_default().chunks_exact(4).take(512).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();

    let job_part = gpu_part_of_tres_freq(&job).unwrap_or(&job);
    let def_opt = if def.is_empty() { None } else { Some(def.as_str()) };
    let parsed = parse_gpu_freq(Some(job_part), def_opt);
    let _ = parse_gpu_freq(None, def_opt);
    for note in &parsed.notes {
        let _ = &note.message;
    }

    let mut desc = clocks;
    sort_descending(&mut desc);
    for req in [parsed.graphics, parsed.memory].into_iter().flatten() {
        let _ = req.to_string();
        if let Some((mhz, _note)) = nearest_freq(req, &desc) {
            assert!(desc.contains(&mhz), "chose {mhz} MHz, not a supported clock of {desc:?}");
        }
    }
    for raw in desc.iter().take(4) {
        if let Some(req) = FreqRequest::from_raw(*raw) {
            let _ = nearest_freq(req, &desc);
        }
    }
    let _ = freq_listing(&desc, "GPU Graphics", 2);
    if let [a, b, ..] = desc[..] {
        let _ = applied_text(a, b);
    }
});
