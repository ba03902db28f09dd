//! What `gres-rs` reads of shared objects and programs without loading
//! them: 64-bit little-endian ELF files, through their section headers.
//! Plugin files (their `plugin_version`, `plugin_type`, what they need of
//! our library), our library's exports, and the installed slurmd's
//! `RUNPATH` and default `PluginDir`.  Every offset is checked against the
//! file: a truncated or corrupt file gives an error or nothing, never a
//! panic.

/// A plugin file or our library is a few MiB at most: `check` and
/// `status` read none larger than this.
pub const MAX_PLUGIN_FILE_LEN: u64 = 64 << 20;

const SHT_RELA: u32 = 4;
const SHT_DYNAMIC: u32 = 6;
const SHT_NOBITS: u32 = 8;
const SHT_DYNSYM: u32 = 11;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;
/// `R_X86_64_RELATIVE`, `R_AARCH64_RELATIVE`.
const RELATIVE: [u32; 2] = [8, 1027];

pub fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}
pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}
pub fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

fn corrupt() -> String {
    "truncated or corrupt ELF file".to_string()
}

struct Section {
    kind: u32,
    addr: u64,
    offset: usize,
    size: usize,
    link: u32,
}

/// One entry of the dynamic symbol table.
pub struct DynSym<'a> {
    pub name: &'a [u8],
    /// Its address when the file is loaded (`st_value`).
    pub value: u64,
    /// Undefined here: to be found in another object at load time.
    pub undefined: bool,
    /// The symbol's object in the file (`None` for code outside the
    /// file's sections or zero-filled data), and its offset.
    pub object: Option<(&'a [u8], usize)>,
}

/// An ELF file read through its section headers.
pub struct Elf<'a> {
    bytes: &'a [u8],
    sections: Vec<Section>,
}

impl<'a> Elf<'a> {
    /// `Err` says why the bytes are not a 64-bit little-endian ELF file
    /// whose sections lie inside it.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        if bytes.get(..4) != Some(b"\x7fELF") {
            return Err("not an ELF file".into());
        }
        if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
            return Err("not a 64-bit little-endian ELF file".into());
        }
        let shoff = usize::try_from(u64_at(bytes, 0x28).ok_or_else(corrupt)?).map_err(|_| corrupt())?;
        let (shentsize, shnum) = (usize::from(u16_at(bytes, 0x3a).ok_or_else(corrupt)?), usize::from(u16_at(bytes, 0x3c).ok_or_else(corrupt)?));
        if shentsize < 64 {
            return Err(corrupt());
        }
        let sections = (0..shnum)
            .map(|i| {
                let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
                let s = Section {
                    kind: u32_at(bytes, h.checked_add(4)?)?,
                    addr: u64_at(bytes, h.checked_add(16)?)?,
                    offset: usize::try_from(u64_at(bytes, h.checked_add(24)?)?).ok()?,
                    size: usize::try_from(u64_at(bytes, h.checked_add(32)?)?).ok()?,
                    link: u32_at(bytes, h.checked_add(40)?)?,
                };
                // Every section with bytes in the file is inside it.
                (s.kind == SHT_NOBITS || s.offset.checked_add(s.size)? <= bytes.len()).then_some(s)
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(corrupt)?;
        Ok(Elf { bytes, sections })
    }

    fn contents(&self, s: &Section) -> &'a [u8] {
        // In bounds: checked by `parse` (empty for NOBITS).
        if s.kind == SHT_NOBITS {
            &[]
        } else {
            &self.bytes[s.offset..s.offset + s.size]
        }
    }

    /// The NUL-terminated string at `at` of string table `table`.
    fn string(&self, table: &Section, at: usize) -> Option<&'a [u8]> {
        let rest = self.contents(table).get(at..)?;
        Some(&rest[..rest.iter().position(|&b| b == 0)?])
    }

    fn section_at_address(&self, addr: u64) -> Option<&Section> {
        self.sections.iter().find(|s| s.kind != SHT_NOBITS && s.addr != 0 && addr >= s.addr && addr - s.addr < s.size as u64)
    }

    /// The entries of the dynamic section up to `DT_NULL` (tag, value),
    /// and its string table; `None` without one (a static program).
    fn dynamic(&self) -> Option<(Vec<(u64, u64)>, &Section)> {
        let dynamic = self.sections.iter().find(|s| s.kind == SHT_DYNAMIC)?;
        let strings = self.sections.get(dynamic.link as usize)?;
        let bytes = self.contents(dynamic);
        let entries =
            (0..bytes.len() / 16).map_while(|i| Some((u64_at(bytes, i * 16)?, u64_at(bytes, i * 16 + 8)?))).take_while(|(tag, _)| *tag != DT_NULL).collect();
        Some((entries, strings))
    }

    fn dynamic_string(&self, strings: &Section, value: u64) -> Option<&'a [u8]> {
        self.string(strings, usize::try_from(value).ok()?)
    }

    /// The libraries named in `DT_NEEDED`, in order.
    pub fn needed(&self) -> Result<Vec<String>, String> {
        let Some((entries, strings)) = self.dynamic() else { return Ok(Vec::new()) };
        entries
            .iter()
            .filter(|(tag, _)| *tag == DT_NEEDED)
            .map(|(_, v)| self.dynamic_string(strings, *v).map(|s| String::from_utf8_lossy(s).into_owned()).ok_or_else(corrupt))
            .collect()
    }

    /// `DT_RUNPATH`, else `DT_RPATH` (the dynamic loader ignores the second
    /// when the first is there).
    pub fn run_path(&self) -> Option<String> {
        let (entries, strings) = self.dynamic()?;
        let value = |tag: u64| {
            let (_, v) = entries.iter().find(|(t, _)| *t == tag)?;
            std::str::from_utf8(self.dynamic_string(strings, *v)?).ok().map(str::to_string)
        };
        value(DT_RUNPATH).or_else(|| value(DT_RPATH))
    }

    /// The dynamic symbols; `Err` says why not.
    pub fn dynamic_symbols(&self) -> Result<Vec<DynSym<'a>>, String> {
        let dynsym = self.sections.iter().find(|s| s.kind == SHT_DYNSYM).ok_or("no dynamic symbol table: not a shared object")?;
        let names = self.sections.get(dynsym.link as usize).ok_or_else(corrupt)?;
        let table = self.contents(dynsym);
        let object = |value: u64, size: u64, shndx: u16| -> Option<(&'a [u8], usize)> {
            let sec = self.sections.get(usize::from(shndx))?;
            if sec.kind == SHT_NOBITS || value < sec.addr || value.checked_add(size)? > sec.addr.checked_add(sec.size as u64)? {
                return None;
            }
            let start = sec.offset.checked_add(usize::try_from(value - sec.addr).ok()?)?;
            Some((self.bytes.get(start..start.checked_add(usize::try_from(size).ok()?)?)?, start))
        };
        (0..table.len() / 24)
            .map(|i| {
                let at = i * 24;
                let (name, shndx, value, size) = (u32_at(table, at)?, u16_at(table, at + 6)?, u64_at(table, at + 8)?, u64_at(table, at + 16)?);
                let name = self.string(names, usize::try_from(name).ok()?)?;
                Some(DynSym { name, value, undefined: shndx == 0, object: if shndx == 0 { None } else { object(value, size, shndx) } })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(corrupt)
    }

    /// The string the exported pointer variable `symbol` points to (`char
    /// *symbol = "...";`): the address is the addend of its `RELATIVE`
    /// relocation (a shared object's), else the word stored in the
    /// variable (a `REL` or `RELR` relocation's addend, or a fixed
    /// address).
    pub fn string_pointed_to(&self, symbol: &[u8]) -> Option<String> {
        let symbols = self.dynamic_symbols().ok()?;
        let variable = symbols.iter().find(|s| s.name == symbol && !s.undefined)?;
        let (address, (_, at)) = (variable.value, variable.object.filter(|(bytes, _)| bytes.len() == 8)?);
        let relocated = self.sections.iter().filter(|s| s.kind == SHT_RELA).find_map(|s| {
            let table = self.contents(s);
            (0..table.len() / 24).find_map(|i| {
                let (offset, info, addend) = (u64_at(table, i * 24)?, u64_at(table, i * 24 + 8)?, u64_at(table, i * 24 + 16)?);
                (offset == address && RELATIVE.contains(&((info & 0xffff_ffff) as u32))).then_some(addend)
            })
        });
        let target = match relocated {
            Some(addend) => addend,
            None => u64_at(self.bytes, at)?,
        };
        let s = self.section_at_address(target)?;
        let text = self.string(s, usize::try_from(target - s.addr).ok()?)?;
        std::str::from_utf8(text).ok().map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_elf_or_truncated() {
        assert_eq!(Elf::parse(b"#!/bin/sh\n").err().as_deref(), Some("not an ELF file"));
        assert_eq!(Elf::parse(b"\x7fELF\x01\x01").err().as_deref(), Some("not a 64-bit little-endian ELF file"));
        assert_eq!(Elf::parse(b"\x7fELF\x02\x01\x01").err().as_deref(), Some("truncated or corrupt ELF file"));
        // Sections beyond the end of the file: refused, not read.
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        for cut in [64, 4096, exe.len() / 2] {
            assert!(Elf::parse(&exe[..cut]).is_err(), "cut at {cut}");
        }
        let elf = Elf::parse(&exe).unwrap();
        assert!(elf.needed().unwrap().iter().any(|n| n.starts_with("libc.so")), "{:?}", elf.needed());
        assert!(!elf.dynamic_symbols().unwrap().is_empty());
    }
}
