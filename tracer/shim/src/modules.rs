//! The module map (executable and shared libraries: path, build-id, load bias, code range) and
//! the readable address ranges the block decoder may read, from `dl_iterate_phdr`.

use std::ffi::CStr;
use std::sync::{Mutex, RwLock};

use cachescope_schema::ModuleInfo;

use crate::recorder::lock;

/// One loaded module with its segments.
#[derive(Clone, Debug, Default)]
pub(crate) struct Module {
    pub info: ModuleInfo,
    /// Readable `PT_LOAD` segments `[start, end)`.
    pub readable: Vec<(u64, u64)>,
}

/// All modules loaded at one moment.
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    pub modules: Vec<Module>,
}

impl Snapshot {
    /// The trace's view of the modules.
    pub fn infos(&self) -> Vec<ModuleInfo> {
        self.modules.iter().map(|m| m.info.clone()).collect()
    }

    /// The readable range containing `addr`.
    pub fn readable_range(&self, addr: u64) -> Option<(u64, u64)> {
        self.modules
            .iter()
            .flat_map(|m| m.readable.iter().copied())
            .find(|&(s, e)| s <= addr && addr < e)
    }

    /// The executable range of the module containing `addr`.
    pub fn code_range_of(&self, addr: u64) -> Option<(u64, u64)> {
        self.modules
            .iter()
            .map(|m| (m.info.start, m.info.end))
            .find(|&(s, e)| s <= addr && addr < e)
    }
}

/// The current map, refreshed after `dlopen`.
static CURRENT: RwLock<Option<Snapshot>> = RwLock::new(None);
/// Serializes refreshes.
static REFRESH: Mutex<()> = Mutex::new(());

/// Reads the module map now, stores it as the current map and returns it.
pub(crate) fn snapshot() -> Snapshot {
    let _g = lock(&REFRESH);
    let mut snap = Snapshot::default();
    // SAFETY: the callback only reads the `dl_phdr_info` the loader passes, for the duration
    // of the call, and `data` is the `Snapshot` above.
    unsafe {
        libc::dl_iterate_phdr(Some(visit), (&mut snap as *mut Snapshot).cast());
    }
    *CURRENT.write().unwrap_or_else(|p| p.into_inner()) = Some(snap.clone());
    snap
}

/// The modules the trace has (path, load bias): its header's and those sent since. Kept apart
/// from [`CURRENT`], which other code refreshes too: a library's constructors run inside
/// `dlopen` and their first block already takes a snapshot that has the library in it.
static REPORTED: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());

/// Notes that the trace's header lists `snap`'s modules.
pub(crate) fn reported(snap: &Snapshot) {
    lock(&REPORTED).extend(
        snap.modules
            .iter()
            .map(|m| (m.info.path.clone(), m.info.load_bias)),
    );
}

/// Takes a new snapshot; returns the modules the trace does not have yet (and notes them as
/// reported).
pub(crate) fn refresh_new() -> Vec<ModuleInfo> {
    let snap = snapshot();
    let mut reported = lock(&REPORTED);
    let new: Vec<ModuleInfo> = snap
        .modules
        .into_iter()
        .filter(|m| !reported.contains(&(m.info.path.clone(), m.info.load_bias)))
        .map(|m| m.info)
        .collect();
    reported.extend(new.iter().map(|i| (i.path.clone(), i.load_bias)));
    new
}

/// Runs `f` on the current map (taking one if none was taken yet).
pub(crate) fn with_current<R>(f: impl FnOnce(&Snapshot) -> R) -> R {
    {
        let g = CURRENT.read().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = g.as_ref() {
            return f(s);
        }
    }
    let s = snapshot();
    f(&s)
}

unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid info for the call; `data` is our `Snapshot`.
    let (info, snap) = unsafe { (&*info, &mut *data.cast::<Snapshot>()) };
    let bias = info.dlpi_addr;
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    let path = if name.is_empty() && snap.modules.is_empty() {
        std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    } else if !name.is_empty() && !name.starts_with('/') {
        // `dlopen("lib/x.so")` names it as written: make it absolute while the working
        // directory is the one it was loaded from, so that reports can open it from anywhere.
        std::fs::canonicalize(&name)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or(name)
    } else {
        name
    };
    let phdrs: &[libc::Elf64_Phdr] = if info.dlpi_phdr.is_null() {
        &[]
    } else {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
    };
    let mut module = Module::default();
    module.info.path = path;
    module.info.load_bias = bias;
    let (mut start, mut end) = (u64::MAX, 0);
    for ph in phdrs {
        let lo = bias.wrapping_add(ph.p_vaddr);
        let hi = lo.wrapping_add(ph.p_memsz);
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_R != 0 {
            module
                .readable
                .push((lo, lo.wrapping_add(ph.p_filesz.min(ph.p_memsz))));
        }
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
            start = start.min(lo);
            end = end.max(hi);
        }
        if ph.p_type == libc::PT_NOTE && module.info.build_id.is_empty() {
            // SAFETY: a PT_NOTE segment of a loaded module is mapped and readable.
            let notes =
                unsafe { std::slice::from_raw_parts(lo as *const u8, ph.p_filesz as usize) };
            module.info.build_id = build_id(notes).unwrap_or_default();
        }
    }
    if start < end {
        module.info.start = start;
        module.info.end = end;
    }
    snap.modules.push(module);
    0
}

/// The GNU build-id in a run of ELF notes.
fn build_id(mut notes: &[u8]) -> Option<Vec<u8>> {
    let word = |b: &[u8], at: usize| -> Option<usize> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let align4 = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let name_end = 12 + align4(namesz);
        let desc_end = name_end.checked_add(align4(descsz))?;
        let name = notes.get(12..12 + namesz)?;
        if kind == 3 && name == b"GNU\0" {
            return Some(notes.get(name_end..name_end + descsz)?.to_vec());
        }
        notes = notes.get(desc_end..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_is_found_after_other_notes() {
        let mut notes = Vec::new();
        // An ABI-tag note (type 1, name "GNU", 16-byte desc), then the build-id.
        notes.extend_from_slice(&4u32.to_ne_bytes());
        notes.extend_from_slice(&16u32.to_ne_bytes());
        notes.extend_from_slice(&1u32.to_ne_bytes());
        notes.extend_from_slice(b"GNU\0");
        notes.extend_from_slice(&[0; 16]);
        notes.extend_from_slice(&4u32.to_ne_bytes());
        notes.extend_from_slice(&3u32.to_ne_bytes());
        notes.extend_from_slice(&3u32.to_ne_bytes());
        notes.extend_from_slice(b"GNU\0");
        notes.extend_from_slice(&[0xab, 0xcd, 0xef, 0]);
        assert_eq!(build_id(&notes), Some(vec![0xab, 0xcd, 0xef]));
        assert_eq!(build_id(&notes[..20]), None);
    }

    #[test]
    fn this_test_binary_is_in_the_map() {
        let snap = snapshot();
        let here = this_test_binary_is_in_the_map as *const () as u64;
        assert!(snap.code_range_of(here).is_some());
        assert!(snap.modules[0].info.path.contains("cachescope_shim"));
    }
}
