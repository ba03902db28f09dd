//! Safe wrappers over the Slurm objects the plugins receive: strings,
//! `bitstr_t`, `List`s of gres.conf records and devices, environment arrays
//! and pack buffers.  Conversions copy into core types, so no Rust value
//! ever borrows Slurm memory past a call.

use super::sys;
use gres_core::env::EnvOp;
use gres_core::env_array::{named_from, Names};
use gres_core::model::{Bitmap, ConfFlags, GresDevice, GresRecord, JobAlloc};
use gres_core::wire::{WireError, WireReader, WireWriter};
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;
use std::sync::Mutex;

/// Copy a C string (NULL -> `None`).
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string valid for the call.
pub unsafe fn string_from_c(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated per the caller's contract.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    // Valid UTF-8 (the usual case) is checked the fast way.
    Some(match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    })
}

/// `s` as it reaches Slurm through a C string: without interior NULs.
fn without_nul(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        std::borrow::Cow::Owned(s.replace('\0', ""))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

fn cstring(s: &str) -> CString {
    CString::new(without_nul(s).into_owned()).unwrap_or_default()
}

/// An `xmalloc`ed copy of `s` (NULL for `None`), for Slurm to `xfree`.
/// Interior NULs are left out (a C string would end there).
pub fn xstrdup(s: Option<&str>) -> *mut c_char {
    let Some(s) = s else { return ptr::null_mut() };
    let p = xcalloc::<u8>(s.len() + 1);
    // SAFETY: xcalloc returned s.len() + 1 zeroed bytes owned by us until
    // Slurm frees them; the last one stays 0 and ends the string.
    let dst = unsafe { std::slice::from_raw_parts_mut(p, s.len()) };
    if s.as_bytes().contains(&0) {
        for (d, b) in dst.iter_mut().zip(s.bytes().filter(|b| *b != 0)) {
            *d = b;
        }
    } else {
        dst.copy_from_slice(s.as_bytes());
    }
    p.cast()
}

/// An `xmalloc`ed `name=value` string, as slurmd's `env_array_overwrite`
/// makes it (interior NULs left out, as [`xstrdup`] does).
fn xstr_pair(name: &str, value: &str) -> *mut c_char {
    let len = name.len() + 1 + value.len();
    let p = xcalloc::<u8>(len + 1);
    // SAFETY: xcalloc returned len + 1 zeroed bytes owned by us until
    // Slurm frees them; the bytes written below are at most `len`, so the
    // string ends with a 0.
    let dst = unsafe { std::slice::from_raw_parts_mut(p, len) };
    if name.as_bytes().contains(&0) || value.as_bytes().contains(&0) {
        let bytes = name.bytes().chain(std::iter::once(b'=')).chain(value.bytes()).filter(|b| *b != 0);
        for (d, b) in dst.iter_mut().zip(bytes) {
            *d = b;
        }
    } else {
        dst[..name.len()].copy_from_slice(name.as_bytes());
        dst[name.len()] = b'=';
        dst[name.len() + 1..].copy_from_slice(value.as_bytes());
    }
    p.cast()
}

/// `xmalloc` zeroed memory for `n` values of `T`.
fn xcalloc<T>(n: usize) -> *mut T {
    // SAFETY: slurm_xcalloc either returns zeroed memory of the requested
    // size or aborts the process (it never returns NULL without `try`).
    unsafe { sys::slurm_xcalloc(n.max(1), std::mem::size_of::<T>(), true, false, c"rust".as_ptr(), 0, c"xcalloc".as_ptr()).cast() }
}

/// Free memory from Slurm's allocator.
fn xfree<T>(p: *mut T) {
    let mut v = p.cast::<c_void>();
    // SAFETY: `p` came from xmalloc (or is NULL); slurm_xfree takes the
    // address of the pointer and NULLs it.
    unsafe { sys::slurm_xfree(&mut v) };
}

/// Copy a `bitstr_t` (NULL -> `None`).
///
/// # Safety
/// `b` is NULL or a valid bitmap for the duration of the call.
pub unsafe fn bitmap_from_c(b: *mut sys::bitstr_t) -> Option<Bitmap> {
    if b.is_null() {
        return None;
    }
    // SAFETY: `b` is a valid bitmap per the caller's contract.
    let size = unsafe { sys::slurm_bit_size(b) }.max(0) as usize;
    let mut out = Bitmap::new(size);
    for i in 0..size {
        // SAFETY: `i` is within the bitmap's size.
        if unsafe { sys::slurm_bit_test(b, i as i64) } != 0 {
            out.set(i);
        }
    }
    Some(out)
}

/// A new `bitstr_t` with the bits of `b`, owned by the caller.
pub fn bitmap_to_c(b: &Bitmap) -> *mut sys::bitstr_t {
    // SAFETY: bit_alloc returns a valid bitmap of the given size (or aborts).
    let c = unsafe { sys::slurm_bit_alloc(b.size() as i64) };
    for i in b.ones() {
        // SAFETY: `i < b.size()`, the size `c` was allocated with.
        unsafe { sys::slurm_bit_set(c, i as i64) };
    }
    c
}

/// Copy one gres.conf record.
///
/// # Safety
/// `r` points to a valid `gres_slurmd_conf_t`.
unsafe fn record_from_c(r: *const sys::gres_slurmd_conf_t) -> GresRecord {
    // SAFETY: valid per the caller's contract; strings are NULL or valid.
    unsafe {
        let r = &*r;
        GresRecord {
            flags: ConfFlags(r.config_flags),
            count: r.count,
            cpu_cnt: r.cpu_cnt,
            cpus: string_from_c(r.cpus),
            cpus_bitmap: bitmap_from_c(r.cpus_bitmap),
            file: string_from_c(r.file),
            links: string_from_c(r.links),
            name: string_from_c(r.name).unwrap_or_default(),
            type_name: string_from_c(r.type_name),
            unique_id: string_from_c(r.unique_id),
            plugin_id: r.plugin_id,
        }
    }
}

/// A new `xmalloc`ed `gres_slurmd_conf_t`, freed by slurmd's
/// `destroy_gres_slurmd_conf`.
fn record_to_c(r: &GresRecord) -> *mut sys::gres_slurmd_conf_t {
    let c = xcalloc::<sys::gres_slurmd_conf_t>(1);
    // SAFETY: `c` is freshly allocated, zeroed and exclusively ours.
    let c_ref = unsafe { &mut *c };
    c_ref.config_flags = r.flags.0;
    c_ref.count = r.count;
    c_ref.cpu_cnt = r.cpu_cnt;
    c_ref.cpus = xstrdup(r.cpus.as_deref());
    c_ref.cpus_bitmap = r.cpus_bitmap.as_ref().map(bitmap_to_c).unwrap_or(ptr::null_mut());
    c_ref.file = xstrdup(r.file.as_deref());
    c_ref.links = xstrdup(r.links.as_deref());
    c_ref.name = xstrdup(Some(&r.name));
    c_ref.type_name = xstrdup(r.type_name.as_deref());
    c_ref.unique_id = xstrdup(r.unique_id.as_deref());
    c_ref.plugin_id = r.plugin_id;
    c
}

/// Copy every record of a list of `gres_slurmd_conf_t`, leaving it as is.
///
/// # Safety
/// `list` is NULL or a valid List whose elements are `gres_slurmd_conf_t`.
pub unsafe fn records_from_list(list: sys::List) -> Vec<GresRecord> {
    let mut out = Vec::new();
    if list.is_null() {
        return out;
    }
    // SAFETY: valid list per the caller's contract; the iterator is
    // destroyed before returning and elements are only read.
    unsafe {
        let it = sys::slurm_list_iterator_create(list);
        loop {
            let e = sys::slurm_list_next(it);
            if e.is_null() {
                break;
            }
            out.push(record_from_c(e as *const sys::gres_slurmd_conf_t));
        }
        sys::slurm_list_iterator_destroy(it);
    }
    out
}

/// Whether C string `p` reads as `s` does through [`string_from_c`],
/// without copying it.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string valid for the call.
unsafe fn string_matches_c(s: Option<&str>, p: *const c_char) -> bool {
    match (s, p.is_null()) {
        (None, true) => true,
        (Some(s), false) => {
            // SAFETY: non-NULL and NUL-terminated per the caller's contract.
            let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
            match std::str::from_utf8(bytes) {
                Ok(c) => c == s,
                Err(_) => String::from_utf8_lossy(bytes) == s,
            }
        }
        _ => false,
    }
}

/// Whether bitmap `b` reads as `bits` does through [`bitmap_from_c`].
///
/// # Safety
/// `b` is NULL or a valid bitmap.
unsafe fn bitmap_matches_c(bits: Option<&Bitmap>, b: *mut sys::bitstr_t) -> bool {
    match (bits, b.is_null()) {
        (None, true) => true,
        (Some(bits), false) => {
            // SAFETY: `b` is a valid bitmap per the caller's contract.
            let size = unsafe { sys::slurm_bit_size(b) }.max(0) as usize;
            // SAFETY: every index is within the bitmap's size.
            size == bits.size() && (0..size).all(|i| (unsafe { sys::slurm_bit_test(b, i as i64) } != 0) == bits.test(i))
        }
        _ => false,
    }
}

/// Whether `list` holds exactly `records`, as [`records_from_list`] would
/// copy it: compared in place, so that a plugin need not keep a copy of
/// what it was given to tell whether it changed it.
///
/// # Safety
/// `list` is NULL or a valid List whose elements are `gres_slurmd_conf_t`.
pub unsafe fn list_matches_records(list: sys::List, records: &[GresRecord]) -> bool {
    if list.is_null() {
        return records.is_empty();
    }
    let mut same = true;
    let mut n = 0;
    // SAFETY: valid list per the caller's contract; the iterator is
    // destroyed before returning and elements are only read; their strings
    // are NULL or valid and their bitmaps NULL or valid.
    unsafe {
        let it = sys::slurm_list_iterator_create(list);
        loop {
            let e = sys::slurm_list_next(it) as *const sys::gres_slurmd_conf_t;
            if e.is_null() {
                break;
            }
            let Some(r) = records.get(n) else {
                same = false;
                break;
            };
            n += 1;
            let c = &*e;
            same = c.config_flags == r.flags.0
                && c.count == r.count
                && c.cpu_cnt == r.cpu_cnt
                && c.plugin_id == r.plugin_id
                && (if c.name.is_null() { r.name.is_empty() } else { string_matches_c(Some(r.name.as_str()), c.name) })
                && string_matches_c(r.cpus.as_deref(), c.cpus)
                && string_matches_c(r.file.as_deref(), c.file)
                && string_matches_c(r.links.as_deref(), c.links)
                && string_matches_c(r.type_name.as_deref(), c.type_name)
                && string_matches_c(r.unique_id.as_deref(), c.unique_id)
                && bitmap_matches_c(r.cpus_bitmap.as_ref(), c.cpus_bitmap);
            if !same {
                break;
            }
        }
        sys::slurm_list_iterator_destroy(it);
    }
    same && n == records.len()
}

/// Replace the content of a record list (whose destructor is slurmd's
/// `destroy_gres_slurmd_conf`) with `records`.
///
/// # Safety
/// `list` is a valid List of `gres_slurmd_conf_t` created by slurmd.
pub unsafe fn replace_list_records(list: sys::List, records: &[GresRecord]) {
    // SAFETY: list_flush destroys the current elements with the list's own
    // destructor; the new elements are allocated the way that destructor
    // frees them.
    unsafe {
        sys::slurm_list_flush(list);
        for r in records {
            sys::slurm_list_append(list, record_to_c(r).cast());
        }
    }
}

/// Take ownership of a record list returned by slurmd's gpu plugin: copy and
/// destroy it.
///
/// # Safety
/// `list` is NULL or a valid List of `gres_slurmd_conf_t` owned by us.
pub unsafe fn take_record_list(list: sys::List) -> Option<Vec<GresRecord>> {
    if list.is_null() {
        return None;
    }
    // SAFETY: per the contract; the list is destroyed once copied.
    unsafe {
        let records = records_from_list(list);
        sys::slurm_list_destroy(list);
        Some(records)
    }
}

/// A `List` of `gres_device_t` that slurmd may read and write (it sets the
/// `alloc` field) while the plugin is loaded, rebuilt when the device list
/// changes.
pub struct DeviceListCache {
    inner: Mutex<(sys::List, u64)>,
}

// SAFETY: the List is only touched while holding the mutex (slurmd's own use
// of the returned list happens under its gres_context_lock, as with the
// stock plugins).
unsafe impl Sync for DeviceListCache {}
// SAFETY: see above.
unsafe impl Send for DeviceListCache {}

impl DeviceListCache {
    pub const fn new() -> Self {
        DeviceListCache { inner: Mutex::new((ptr::null_mut(), u64::MAX)) }
    }

    /// The C list for `devices` of generation `generation` (NULL when there
    /// are no devices, as the stock plugins return).
    pub fn get(&self, devices: impl FnOnce() -> Vec<GresDevice>, generation: u64) -> sys::List {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.1 != generation {
            let devices = devices();
            let old = std::mem::replace(&mut g.0, ptr::null_mut());
            if !old.is_null() {
                // SAFETY: `old` was created by us below and is no longer
                // handed out once replaced.
                unsafe { sys::slurm_list_destroy(old) };
            }
            if !devices.is_empty() {
                // SAFETY: a fresh list whose destructor frees elements
                // allocated as below.
                let list = unsafe { sys::slurm_list_create(Some(sys::slurm_destroy_gres_device)) };
                for d in &devices {
                    let c = xcalloc::<sys::gres_device_t>(1);
                    // SAFETY: freshly allocated, zeroed, exclusively ours.
                    let r = unsafe { &mut *c };
                    r.index = d.index as i32;
                    r.alloc = 0;
                    r.dev_desc.major = d.major;
                    r.dev_desc.minor = d.minor;
                    r.dev_desc.type_ = d.dev_type as sys::gres_device_type_t;
                    r.dev_num = d.dev_num;
                    // 25.11 on the core reads GRES_DEV_* bits here; the
                    // core types carry none (no MIG device flag), so 0.
                    #[cfg(slurm_gres_device_flags)]
                    {
                        r.flags = 0;
                    }
                    r.path = xstrdup(Some(&d.path));
                    r.unique_id = xstrdup(d.unique_id.as_deref());
                    // SAFETY: `list` is valid; ownership of `c` passes to it.
                    unsafe { sys::slurm_list_append(list, c.cast()) };
                }
                g.0 = list;
            }
            g.1 = generation;
        }
        g.0
    }
}

impl Default for DeviceListCache {
    fn default() -> Self {
        Self::new()
    }
}

/// A `char ***` environment array of slurmd.
pub struct EnvArray {
    ptr: *mut *mut *mut c_char,
}

impl EnvArray {
    /// # Safety
    /// `ptr` is NULL or points to a (possibly NULL) `xmalloc`ed,
    /// NULL-terminated array of `xmalloc`ed `NAME=value` strings, valid
    /// and changed by no one else for the lifetime of the returned value.
    pub unsafe fn new(ptr: *mut *mut *mut c_char) -> Option<EnvArray> {
        if ptr.is_null() {
            None
        } else {
            Some(EnvArray { ptr })
        }
    }

    /// The array's entries (none for a NULL array).
    fn entries(&self) -> &[*mut c_char] {
        // SAFETY: `self.ptr` is valid (constructor contract) and points to
        // NULL or a NULL-terminated array, unchanged while `&self` lives.
        unsafe {
            let arr = *self.ptr;
            if arr.is_null() {
                return &[];
            }
            let mut n = 0;
            while !(*arr.add(n)).is_null() {
                n += 1;
            }
            std::slice::from_raw_parts(arr, n)
        }
    }

    /// The value of `name`, as slurmd's `getenvp` finds it.
    pub fn get(&self, name: &str) -> Option<String> {
        // The name as slurmd got it through a C string: without NULs.
        let name = without_nul(name);
        // SAFETY: every entry is a valid NUL-terminated string (constructor
        // contract); `named_from` reads byte `k` only when the bytes before
        // it equal the name's, which hold no NUL, so no read goes past the
        // entry's NUL; a match has `name=` before its value.
        unsafe {
            let e = *self.entries().iter().find(|&&e| named_from(&name, 0, |k| *e.cast::<u8>().add(k)))?;
            string_from_c(e.add(name.len() + 1))
        }
    }

    /// Apply `ops` as slurmd's `env_array_overwrite` and `unsetenvp` would,
    /// one after the other (`gres_core::env_array`), reading the array once and
    /// writing it once: new strings and a grown array are `xmalloc`ed,
    /// replaced and removed strings and an outgrown array `xfree`d, as
    /// Slurm's functions do, so that slurmd frees and changes the result as
    /// its own.
    pub fn apply(&mut self, ops: &[EnvOp]) {
        if ops.is_empty() {
            return;
        }
        // Names as slurmd got them through C strings: without NULs.
        let has_nul = |op: &EnvOp| match op {
            EnvOp::Set(k, _) | EnvOp::Unset(k) => k.contains('\0'),
        };
        let cleaned: Vec<EnvOp>;
        let ops = if ops.iter().any(has_nul) {
            cleaned = ops
                .iter()
                .map(|op| match op {
                    EnvOp::Set(k, v) => EnvOp::Set(without_nul(k).into_owned(), v.clone()),
                    EnvOp::Unset(k) => EnvOp::Unset(without_nul(k).into_owned()),
                })
                .collect();
            &cleaned[..]
        } else {
            ops
        };
        let names = Names::of(ops);
        let old = self.entries();
        // The entries named one of the names, in one pass.
        let mut matches = Vec::new();
        for (i, &e) in old.iter().enumerate() {
            // SAFETY: every entry is a valid NUL-terminated string, and
            // `find` reads byte `k` only when the bytes before it are no
            // NUL: no read goes past the entry's NUL.
            if let Some(id) = names.find(|k| unsafe { *e.cast::<u8>().add(k) }) {
                matches.push((i, id));
            }
        }
        let plan = gres_core::env_array::plan(old.len(), &matches, &names, ops);
        if plan.is_unchanged() {
            return;
        }
        let old_len = old.len();
        // SAFETY: valid (constructor contract); the array itself, written
        // below through this pointer, not through the slice read above.
        let arr = unsafe { *self.ptr };
        for i in plan.dropped() {
            // SAFETY: `i` is an index of the old array, whose entry is an
            // xmalloc'ed string no longer in it.
            xfree(unsafe { *arr.add(i) });
        }
        let new_len = old_len - plan.removed.len() + plan.appended.len();
        // SAFETY: `self.ptr` is valid (constructor contract) and the old
        // array, when not NULL, holds `old_len` entries and their NULL: the
        // kept entries are moved up over the removed ones in place (as
        // unsetenvp moves them), replaced ones written in their place, and
        // new ones after them, in place when the result is no longer than
        // the old array (NULLs after it, as unsetenvp leaves them), else in
        // a new xmalloc'ed array that replaces the old one, freed as
        // xrealloc would free it.
        unsafe {
            for &(i, name, value) in &plan.replaced {
                *arr.add(i) = xstr_pair(name, value);
            }
            let target = if new_len <= old_len && !arr.is_null() { arr } else { xcalloc::<*mut c_char>(new_len + 1) };
            let mut n = 0;
            if plan.removed.is_empty() {
                if target != arr && !arr.is_null() {
                    ptr::copy_nonoverlapping(arr, target, old_len);
                }
                n = old_len;
            } else {
                let mut removed = plan.removed.iter().peekable();
                for i in 0..old_len {
                    if removed.next_if_eq(&&i).is_none() {
                        *target.add(n) = *arr.add(i);
                        n += 1;
                    }
                }
            }
            for &(name, value) in &plan.appended {
                *target.add(n) = xstr_pair(name, value);
                n += 1;
            }
            if target == arr {
                for i in n..=old_len {
                    *arr.add(i) = ptr::null_mut();
                }
            } else {
                // A new array is zeroed: its NULL is there.
                xfree(arr);
                *self.ptr = target;
            }
        }
    }
}

/// A pack buffer being written.
pub struct BufWriter {
    buf: *mut sys::buf_t,
}

impl BufWriter {
    /// # Safety
    /// `buf` is a valid pack buffer for the lifetime of the writer.
    pub unsafe fn new(buf: *mut sys::buf_t) -> Option<BufWriter> {
        (!buf.is_null()).then_some(BufWriter { buf })
    }
}

impl WireWriter for BufWriter {
    fn u32(&mut self, v: u32) {
        // SAFETY: valid buffer (constructor contract); pack32 grows it.
        unsafe { sys::slurm_pack32(v, self.buf) };
    }
    fn string(&mut self, s: Option<&str>) {
        match s {
            // SAFETY: packmem with size 0 packs a NULL string.
            None => unsafe { sys::slurm_packmem(ptr::null_mut(), 0, self.buf) },
            Some(s) => {
                let c = cstring(s);
                let bytes = c.as_bytes_with_nul();
                // SAFETY: `bytes` is valid for its length; packmem copies.
                unsafe { sys::slurm_packmem(bytes.as_ptr() as *mut c_void, bytes.len() as u32, self.buf) };
            }
        }
    }
}

/// A pack buffer being read: every read is bounds-checked by Slurm's
/// unpack functions, and reported as an error, not a crash.
pub struct BufReader {
    buf: *mut sys::buf_t,
}

impl BufReader {
    /// # Safety
    /// `buf` is a valid pack buffer for the lifetime of the reader.
    pub unsafe fn new(buf: *mut sys::buf_t) -> Option<BufReader> {
        (!buf.is_null()).then_some(BufReader { buf })
    }
}

impl WireReader for BufReader {
    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let mut v = 0u32;
        // SAFETY: valid buffer; unpack32 checks the remaining length.
        let rc = unsafe { sys::slurm_unpack32(&mut v, self.buf) };
        if rc != 0 {
            return Err(WireError::Short(what));
        }
        Ok(v)
    }
    fn string(&mut self, what: &'static str) -> Result<Option<String>, WireError> {
        let mut p: *mut c_char = ptr::null_mut();
        let mut len = 0u32;
        // SAFETY: valid buffer; the unpack function checks the length
        // against the buffer and returns an xmalloc'd copy or NULL.
        let rc = unsafe { sys::slurm_unpackstr_xmalloc_chooser(&mut p, &mut len, self.buf) };
        if rc != 0 {
            xfree(p);
            return Err(WireError::Short(what));
        }
        // SAFETY: `p` is NULL or a NUL-terminated string we now own.
        let s = unsafe { string_from_c(p) };
        xfree(p);
        Ok(s)
    }
    fn remaining(&self) -> usize {
        // SAFETY: valid buffer; plain field reads.
        let (size, processed) = unsafe { ((*self.buf).size, (*self.buf).processed) };
        size.saturating_sub(processed) as usize
    }
}

/// Copy a job's allocation of one GRES.
///
/// # Safety
/// `js` is NULL or a valid `gres_job_state_t` whose arrays have
/// `node_cnt` entries.
pub unsafe fn job_alloc_from_c(js: *const sys::gres_job_state_t) -> Option<JobAlloc> {
    if js.is_null() {
        return None;
    }
    // SAFETY: valid per the contract.
    let (node_cnt, bit_alloc, cnt_alloc) = unsafe { job_alloc_fields(js) };
    // SAFETY: the arrays have `node_cnt` entries (or are NULL).
    Some(unsafe { alloc_from_c(node_cnt, bit_alloc, cnt_alloc) })
}

/// `node_cnt`, `gres_bit_alloc`, `gres_cnt_node_alloc` of a job state.
///
/// # Safety
/// `js` is a valid `gres_job_state_t` of the running release.
#[cfg(not(slurm_gres_job_state_plus8))]
unsafe fn job_alloc_fields(js: *const sys::gres_job_state_t) -> (u32, *const *mut sys::bitstr_t, *const u64) {
    // SAFETY: valid per the contract.
    let js = unsafe { &*js };
    (js.node_cnt, js.gres_bit_alloc, js.gres_cnt_node_alloc)
}

/// `node_cnt`, `gres_bit_alloc`, `gres_cnt_node_alloc` of a job state of
/// 26.05.4 and later, whose `gres_job_state_t` has 8 bytes more than
/// slurm-headers/26.05 (26.05.3) before `node_cnt` (releases.rs,
/// `slurm_gres_job_state_plus8`): bindgen's offsets plus 8.
///
/// # Safety
/// `js` is a valid `gres_job_state_t` of the running release (at least
/// 8 bytes larger than bindgen's, so every read stays inside it).
#[cfg(slurm_gres_job_state_plus8)]
unsafe fn job_alloc_fields(js: *const sys::gres_job_state_t) -> (u32, *const *mut sys::bitstr_t, *const u64) {
    use std::mem::offset_of;
    const PLUS: usize = 8;
    let base = js.cast::<u8>();
    // SAFETY: the fields of the real struct, at bindgen's offsets plus
    // PLUS (a multiple of 8: alignment kept), inside the object per the
    // contract; plain reads of a u32 and two pointers.
    unsafe {
        (
            base.add(offset_of!(sys::gres_job_state_t, node_cnt) + PLUS).cast::<u32>().read(),
            base.add(offset_of!(sys::gres_job_state_t, gres_bit_alloc) + PLUS).cast::<*const *mut sys::bitstr_t>().read(),
            base.add(offset_of!(sys::gres_job_state_t, gres_cnt_node_alloc) + PLUS).cast::<*const u64>().read(),
        )
    }
}

/// Copy a Prolog/Epilog record.
///
/// # Safety
/// `ei` is NULL or a valid `gres_epilog_info_t` whose arrays have
/// `node_cnt` entries.
pub unsafe fn epilog_info_from_c(ei: *const sys::gres_epilog_info_t) -> Option<JobAlloc> {
    // SAFETY: NULL or valid per the contract.
    let ei = unsafe { ei.as_ref() }?;
    // SAFETY: the arrays have `node_cnt` entries (or are NULL).
    Some(unsafe { alloc_from_c(ei.node_cnt, ei.gres_bit_alloc, ei.gres_cnt_node_alloc) })
}

/// Copy the per-node arrays of an allocation, as `gres_job_state_t` and
/// `gres_epilog_info_t` both hold them.
///
/// # Safety
/// `gres_bit_alloc` is NULL or has `node_cnt` entries, each NULL or a valid
/// bitmap; `gres_cnt_node_alloc` is NULL or has `node_cnt` entries.
unsafe fn alloc_from_c(node_cnt: u32, gres_bit_alloc: *const *mut sys::bitstr_t, gres_cnt_node_alloc: *const u64) -> JobAlloc {
    let n = node_cnt as usize;
    // SAFETY: per the contract.
    unsafe {
        let bit_alloc = (0..n).map(|i| if gres_bit_alloc.is_null() { None } else { bitmap_from_c(*gres_bit_alloc.add(i)) }).collect();
        let cnt = (!gres_cnt_node_alloc.is_null()).then(|| (0..n).map(|i| *gres_cnt_node_alloc.add(i)).collect());
        JobAlloc { node_cnt, bit_alloc, cnt_node_alloc: cnt }
    }
}

/// A new `gres_epilog_info_t`, freed by slurmd.
pub fn epilog_info_to_c(info: &JobAlloc) -> *mut sys::gres_epilog_info_t {
    let c = xcalloc::<sys::gres_epilog_info_t>(1);
    // SAFETY: freshly allocated, zeroed, exclusively ours.
    let r = unsafe { &mut *c };
    let n = info.node_cnt as usize;
    r.node_cnt = info.node_cnt;
    let bits = xcalloc::<*mut sys::bitstr_t>(n);
    for i in 0..n {
        if let Some(Some(b)) = info.bit_alloc.get(i) {
            // SAFETY: `bits` has `n` (zeroed) entries.
            unsafe { *bits.add(i) = bitmap_to_c(b) };
        }
    }
    r.gres_bit_alloc = bits;
    if let Some(cnt) = &info.cnt_node_alloc {
        let arr = xcalloc::<u64>(n);
        for i in 0..n {
            // SAFETY: `arr` has `n` entries.
            unsafe { *arr.add(i) = cnt.get(i).copied().unwrap_or(0) };
        }
        r.gres_cnt_node_alloc = arr;
    }
    c
}

/// slurmd's `fake_gpus.conf`-style path of a file in its config directory.
pub fn extra_conf_path(name: &str) -> Option<String> {
    let n = cstring(name);
    // SAFETY: the shim returns an xmalloc'd string (or NULL) we own.
    let p = unsafe { sys::gres_rs_extra_conf_path(n.as_ptr()) };
    // SAFETY: NULL or a valid C string.
    let s = unsafe { string_from_c(p) };
    xfree(p);
    s
}
