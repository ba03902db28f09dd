//! What slurmd hands to slurmstepd for a GRES plugin (`send_stepd` /
//! `recv_stepd`): the device list and the node's env flags, in the stock
//! plugins' field order so either side may be ours.  Decoding checks every
//! value: a short or corrupt buffer is an error, never a crash or a
//! half-built device list.

use super::behaviour::Behaviour;
use super::model::{ConfFlags, DevType, GresDevice};
use super::sharing::{SharedDev, SharedKind};
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("buffer ends before {0}")]
    Short(&'static str),
    #[error("invalid {what}: {value}")]
    Invalid { what: &'static str, value: u64 },
    #[error("device count {0} is more than the buffer can hold")]
    TooMany(u32),
}

/// Writes Slurm's packed forms.
pub trait WireWriter {
    fn u32(&mut self, v: u32);
    /// `packstr`: a string, or `None` for NULL.
    fn string(&mut self, s: Option<&str>);
    /// `pack64`: big-endian, the high half then the low half.
    fn u64(&mut self, v: u64) {
        self.u32((v >> 32) as u32);
        self.u32(v as u32);
    }
}

/// Reads Slurm's packed forms, failing on a short buffer.
pub trait WireReader {
    fn u32(&mut self, what: &'static str) -> Result<u32, WireError>;
    fn string(&mut self, what: &'static str) -> Result<Option<String>, WireError>;
    /// Bytes not yet read (bounds the device count before allocating).
    fn remaining(&self) -> usize;
    /// `unpack64`.
    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        let hi = u64::from(self.u32(what)?);
        let lo = u64::from(self.u32(what)?);
        Ok((hi << 32) | lo)
    }
}

/// Smallest packed size of one device: five u32 and two empty strings.
const MIN_DEVICE_BYTES: usize = 5 * 4 + 2 * 4;

/// `GRES_DEV_MIG`, bit 0 of a device's flags on the wire.
const DEV_MIG: u32 = 1 << 0;

/// The device list in the layout of the release that behaves as
/// `behaviour` (each device's flags last where
/// [`Behaviour::device_flags_on_wire`]).
pub fn write_devices_as(w: &mut dyn WireWriter, devices: &[GresDevice], behaviour: &Behaviour) {
    w.u32(devices.len() as u32);
    for d in devices {
        w.u32(d.index);
        w.u32(d.dev_num as u32);
        w.u32(d.dev_type as u32);
        w.u32(d.major);
        w.u32(d.minor);
        w.string(Some(&d.path));
        w.string(d.unique_id.as_deref());
        if behaviour.device_flags_on_wire {
            w.u32(if d.mig { DEV_MIG } else { 0 });
        }
    }
}

/// What [`write_devices_as`] wrote for the release that behaves as
/// `behaviour`, every value checked.
pub fn read_devices_as(r: &mut dyn WireReader, behaviour: &Behaviour) -> Result<Vec<GresDevice>, WireError> {
    let count = r.u32("device count")?;
    let min = MIN_DEVICE_BYTES + if behaviour.device_flags_on_wire { 4 } else { 0 };
    if (count as usize).saturating_mul(min) > r.remaining() {
        return Err(WireError::TooMany(count));
    }
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let index = r.u32("device index")?;
        let dev_num = r.u32("device number")? as i32;
        let t = r.u32("device type")?;
        let dev_type = DevType::from_u32(t).ok_or(WireError::Invalid { what: "device type", value: t as u64 })?;
        let major = r.u32("device major")?;
        let minor = r.u32("device minor")?;
        let path = r.string("device path")?.unwrap_or_default();
        let unique_id = r.string("device unique id")?;
        let mig = behaviour.device_flags_on_wire && r.u32("device flags")? & DEV_MIG != 0;
        out.push(GresDevice { index, dev_num, dev_type, major, minor, path, unique_id, mig });
    }
    Ok(out)
}

/// The gres/gpu message: devices, then the node's env flags, in the
/// layout of the release that behaves as `behaviour`.
pub fn write_gpu_as(w: &mut dyn WireWriter, devices: &[GresDevice], node_flags: ConfFlags, behaviour: &Behaviour) {
    write_devices_as(w, devices, behaviour);
    w.u32(node_flags.0);
}

/// What [`write_gpu_as`] wrote, every value checked.
pub fn read_gpu_as(r: &mut dyn WireReader, behaviour: &Behaviour) -> Result<(Vec<GresDevice>, ConfFlags), WireError> {
    let devices = read_devices_as(r, behaviour)?;
    let flags = r.u32("node flags")?;
    Ok((devices, ConfFlags(flags)))
}

/// An in-memory encoding with Slurm's byte layout (big-endian u32; strings
/// as a u32 length including the NUL, then the bytes), for tests and fuzzing.
#[derive(Default, Debug, Clone)]
pub struct MemWire {
    pub bytes: Vec<u8>,
    pub pos: usize,
}

impl WireWriter for MemWire {
    fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_be_bytes());
    }
    fn string(&mut self, s: Option<&str>) {
        match s {
            None => WireWriter::u32(self, 0),
            Some(s) => {
                WireWriter::u32(self, s.len() as u32 + 1);
                self.bytes.extend_from_slice(s.as_bytes());
                self.bytes.push(0);
            }
        }
    }
}

impl WireReader for MemWire {
    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let b = self.bytes.get(self.pos..self.pos + 4).ok_or(WireError::Short(what))?;
        self.pos += 4;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn string(&mut self, what: &'static str) -> Result<Option<String>, WireError> {
        let len = WireReader::u32(self, what)? as usize;
        if len == 0 {
            return Ok(None);
        }
        let b = self.bytes.get(self.pos..self.pos.saturating_add(len)).ok_or(WireError::Short(what))?;
        self.pos += len;
        let body = b.strip_suffix(&[0]).unwrap_or(b);
        Ok(Some(String::from_utf8_lossy(body).into_owned()))
    }
    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }
}

// ---------------------------------------------------------------------------
// gres/mps and gres/shard
// ---------------------------------------------------------------------------

/// What slurmd hands to slurmstepd for a shared GRES (gres/mps,
/// gres/shard).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedStepd {
    pub devices: Vec<GresDevice>,
    /// Sent by gres/shard only (gres/mps sets CUDA variables only).
    pub node_flags: ConfFlags,
    pub counts: Vec<SharedDev>,
}

/// Packed size of one per-GPU count: two 64-bit numbers.
const SHARED_DEV_BYTES: usize = 16;

/// The stock plugins' message: the devices, the node's flags (shard only),
/// then the count and the device number of each GPU, in the layout of the
/// release that behaves as `behaviour`.
pub fn write_shared_as(w: &mut dyn WireWriter, kind: SharedKind, info: &SharedStepd, behaviour: &Behaviour) {
    write_devices_as(w, &info.devices, behaviour);
    if kind == SharedKind::Shard {
        w.u32(info.node_flags.0);
    }
    w.u32(info.counts.len() as u32);
    for c in &info.counts {
        w.u64(c.count);
        // A C int widened to 64 bits: -1 travels as all ones.
        w.u64(c.id as i64 as u64);
    }
}

/// What [`write_shared_as`] wrote, every value checked.
pub fn read_shared_as(r: &mut dyn WireReader, kind: SharedKind, behaviour: &Behaviour) -> Result<SharedStepd, WireError> {
    let devices = read_devices_as(r, behaviour)?;
    let node_flags = if kind == SharedKind::Shard { ConfFlags(r.u32("node flags")?) } else { ConfFlags(0) };
    let n = r.u32("shared device count")?;
    if (n as usize).saturating_mul(SHARED_DEV_BYTES) > r.remaining() {
        return Err(WireError::TooMany(n));
    }
    let mut counts = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let count = r.u64("shared device count value")?;
        let raw = r.u64("shared device id")?;
        let id = i32::try_from(raw as i64).map_err(|_| WireError::Invalid { what: "shared device id", value: raw })?;
        counts.push(SharedDev { id, count });
    }
    Ok(SharedStepd { devices, node_flags, counts })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The baseline release's messages, which most tests use.
    fn write_devices(w: &mut dyn WireWriter, devices: &[GresDevice]) {
        write_devices_as(w, devices, &Behaviour::BASELINE)
    }
    fn read_devices(r: &mut dyn WireReader) -> Result<Vec<GresDevice>, WireError> {
        read_devices_as(r, &Behaviour::BASELINE)
    }
    /// The gres/gpu message: devices, then the node's env flags.
    fn write_gpu(w: &mut dyn WireWriter, devices: &[GresDevice], node_flags: ConfFlags) {
        write_gpu_as(w, devices, node_flags, &Behaviour::BASELINE)
    }
    fn read_gpu(r: &mut dyn WireReader) -> Result<(Vec<GresDevice>, ConfFlags), WireError> {
        read_gpu_as(r, &Behaviour::BASELINE)
    }
    /// The stock plugins' message: the devices, the node's flags (shard only),
    /// then the count and the device number of each GPU.
    fn write_shared(w: &mut dyn WireWriter, kind: SharedKind, info: &SharedStepd) {
        write_shared_as(w, kind, info, &Behaviour::BASELINE)
    }
    fn read_shared(r: &mut dyn WireReader, kind: SharedKind) -> Result<SharedStepd, WireError> {
        read_shared_as(r, kind, &Behaviour::BASELINE)
    }

    fn sample() -> Vec<GresDevice> {
        vec![
            GresDevice { index: 0, dev_num: 0, dev_type: DevType::Char, major: 195, minor: 0, path: "/dev/nvidia0".into(), unique_id: None, mig: false },
            GresDevice {
                index: 1,
                dev_num: 1,
                dev_type: DevType::Char,
                major: 195,
                minor: 1,
                path: "/dev/nvidia1".into(),
                unique_id: Some("MIG-1".into()),
                mig: false,
            },
        ]
    }

    #[test]
    fn round_trip() {
        let mut w = MemWire::default();
        write_gpu(&mut w, &sample(), ConfFlags(ConfFlags::ENV_NVML));
        let (d, f) = read_gpu(&mut w).unwrap();
        assert_eq!(d, sample());
        assert_eq!(f, ConfFlags(ConfFlags::ENV_NVML));
        assert_eq!(w.remaining(), 0);
    }

    /// With device flags on the wire, a MIG device keeps its mark; every
    /// truncation is still an error.
    #[test]
    fn device_flags_travel_where_the_release_packs_them() {
        let with_flags = Behaviour { device_flags_on_wire: true, ..Behaviour::BASELINE };
        let mut devices = sample();
        devices[1].mig = true;
        let mut w = MemWire::default();
        write_gpu_as(&mut w, &devices, ConfFlags(ConfFlags::ENV_NVML), &with_flags);
        let mut plain = MemWire::default();
        write_gpu(&mut plain, &devices, ConfFlags(ConfFlags::ENV_NVML));
        assert_eq!(w.bytes.len(), plain.bytes.len() + 8);
        let (d, _) = read_gpu_as(&mut w.clone(), &with_flags).unwrap();
        assert_eq!(d, devices);
        // The baseline layout has no flags: the mark is lost.
        assert!(!read_gpu(&mut plain).unwrap().0[1].mig);
        for cut in 0..w.bytes.len() {
            let mut r = MemWire { bytes: w.bytes[..cut].to_vec(), pos: 0 };
            assert!(read_gpu_as(&mut r, &with_flags).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let mut w = MemWire::default();
        write_gpu(&mut w, &sample(), ConfFlags(0));
        for cut in 0..w.bytes.len() {
            let mut r = MemWire { bytes: w.bytes[..cut].to_vec(), pos: 0 };
            assert!(read_gpu(&mut r).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn huge_count_and_bad_type_rejected() {
        let mut w = MemWire::default();
        WireWriter::u32(&mut w, u32::MAX);
        assert_eq!(read_devices(&mut w.clone()), Err(WireError::TooMany(u32::MAX)));
        let mut w = MemWire::default();
        write_devices(&mut w, &sample());
        w.bytes[4 + 8 + 3] = 9; // type of the first device
        assert!(matches!(read_devices(&mut w), Err(WireError::Invalid { .. })));
    }

    // -- gres/mps and gres/shard ------------------------------------------

    fn shared_sample() -> SharedStepd {
        let mut devices = crate::model::test_devices(2);
        devices[1].unique_id = Some("MIG-1".into());
        SharedStepd {
            devices,
            node_flags: ConfFlags(ConfFlags::ENV_NVML),
            counts: vec![SharedDev { id: 0, count: 1300 }, SharedDev { id: -1, count: u64::MAX }],
        }
    }

    #[test]
    fn stepd_round_trip() {
        for kind in [SharedKind::Mps, SharedKind::Shard] {
            let mut w = MemWire::default();
            write_shared(&mut w, kind, &shared_sample());
            let got = read_shared(&mut w, kind).unwrap();
            let mut want = shared_sample();
            if kind == SharedKind::Mps {
                want.node_flags = ConfFlags(0);
            }
            assert_eq!(got, want);
            assert_eq!(w.remaining(), 0);
        }
    }

    #[test]
    fn stepd_layout_is_slurms() {
        // Devices (none), then the count, then pack64 count and id.
        let mut w = MemWire::default();
        write_shared(&mut w, SharedKind::Mps, &SharedStepd { counts: vec![SharedDev { id: -1, count: 0x1_0000_0002 }], ..Default::default() });
        assert_eq!(w.bytes, [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 2], [0xff; 4], [0xff; 4]].concat());
    }

    #[test]
    fn every_truncation_of_a_shared_message_is_an_error() {
        for kind in [SharedKind::Mps, SharedKind::Shard] {
            let mut w = MemWire::default();
            write_shared(&mut w, kind, &shared_sample());
            for cut in 0..w.bytes.len() {
                let mut r = MemWire { bytes: w.bytes[..cut].to_vec(), pos: 0 };
                assert!(read_shared(&mut r, kind).is_err(), "{kind:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn bad_counts_and_ids_are_rejected() {
        let mut w = MemWire::default();
        write_devices(&mut w, &[]);
        WireWriter::u32(&mut w, u32::MAX);
        assert_eq!(read_shared(&mut w, SharedKind::Mps), Err(WireError::TooMany(u32::MAX)));
        let mut w = MemWire::default();
        write_devices(&mut w, &[]);
        WireWriter::u32(&mut w, 1);
        WireWriter::u64(&mut w, 5);
        WireWriter::u64(&mut w, 1 << 40);
        assert!(matches!(read_shared(&mut w, SharedKind::Mps), Err(WireError::Invalid { what: "shared device id", .. })));
    }
}
