//! Memory reserved at once and written a little at a time: the handle
//! space ([`crate::handle_space`]) and the slots of the heap storage
//! ([`crate::capacity`]), which hold the objects' locks too
//! ([`crate::lock`]). Each is an anonymous mapping, whose pages the kernel makes resident only as
//! they are first touched, and is kept out of transparent huge pages, so
//! that what is resident is what was written (docs/c-abi.md, "Resident
//! memory under churn").
//!
//! The slots are not taken from the global allocator: Rust's `System`
//! allocator serves `alloc_zeroed` of an alignment above 16 bytes (a
//! cache-aligned slot is 64) with `posix_memalign` and then
//! writes zeros over the whole block itself, which makes every page of it
//! resident at once. A [`Zeroed`] mapping is zero already (mmap(2)).
//!
//! With transparent huge pages `always` (the setting of many
//! distributions' kernels, and of the soft-RoCE guest), the kernel backs
//! an aligned 2 MiB stretch of anonymous memory with one huge page at its
//! first write, and khugepaged later folds any stretch in which a single
//! 4 KiB page is present into one (`khugepaged/max_ptes_none` is 511 by
//! default; the kernel's Documentation/admin-guide/mm/transhuge.rst). A
//! handle word is 8 bytes a creation and a slot a few hundred: backed
//! that way, each would hold up to 2 MiB resident, and a program that
//! churns objects would see its resident set climb by 2 MiB steps towards
//! the whole reservation. `MADV_NOHUGEPAGE` (madvise(2)) keeps such
//! memory in small pages whatever the system's setting.

use std::alloc::Layout;
use std::ptr::NonNull;

/// Keep the whole pages among the `len` bytes at `start` in small pages
/// (madvise(2) `MADV_NOHUGEPAGE`). The memory must be the caller's own:
/// the pages touched are those lying wholly inside it.
pub(crate) fn small_pages(start: usize, len: usize) {
    let page = page_size();
    let Some(first) = start.checked_next_multiple_of(page) else { return };
    let end = start.saturating_add(len) / page * page;
    if end <= first {
        return;
    }
    // SAFETY: MADV_NOHUGEPAGE changes how the kernel backs these pages,
    // never their contents or whether they are mapped, and they lie
    // wholly inside the caller's memory. A kernel without transparent
    // huge pages refuses the advice (EINVAL) and has none to keep them
    // from, so the answer is not looked at.
    unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_NOHUGEPAGE) };
}

/// The size of a page (sysconf(3) `_SC_PAGESIZE`).
fn page_size() -> usize {
    // SAFETY: no pointers; the page size or -1.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1)
}

/// Zeroed memory in an anonymous private mapping of its own, kept in
/// small pages ([`small_pages`]). The kernel fills such a mapping with
/// zeros (mmap(2) `MAP_ANONYMOUS`: "its contents are initialized to
/// zero") and gives it a page of memory only where it is first written,
/// so it is resident page by page as it is used. It is unmapped when
/// dropped.
pub(crate) struct Zeroed {
    ptr: NonNull<u8>,
    /// Whole pages.
    len: usize,
}

// SAFETY: a `Zeroed` owns its mapping as a `Box<[u8]>` owns its memory:
// no other value refers to it, and it never reads or writes the memory
// itself. Moving it to another thread moves that ownership, and unmapping
// from any thread is the same munmap(2); sharing `&Zeroed` hands out only
// its address and length, and whoever goes through the address answers
// for what it does there.
unsafe impl Send for Zeroed {}
// SAFETY: as above.
unsafe impl Sync for Zeroed {}

impl Zeroed {
    /// Zeroed memory for `layout`: its size rounded up to whole pages, at
    /// the start of a mapping, which is aligned to the page (mmap(2)).
    /// `None` for a size of 0, an alignment above the page size (which a
    /// mapping is not sure to meet), or a mapping the kernel refuses.
    pub(crate) fn new(layout: Layout) -> Option<Zeroed> {
        let page = page_size();
        if layout.size() == 0 || layout.align() > page {
            return None;
        }
        let len = layout.size().checked_next_multiple_of(page)?;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks
        // touches no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let Some(ptr) = NonNull::new(p.cast::<u8>()) else {
            // SAFETY: the mapping just made, which nothing refers to. The
            // kernel places one at 0 only where `vm.mmap_min_addr` is 0
            // (the kernel's Documentation/admin-guide/sysctl/vm.rst), and
            // no reference may point there.
            unsafe { libc::munmap(p, len) };
            return None;
        };
        // Written a slot at a time: in small pages, or one
        // written in a fresh 2 MiB stretch could hold all of it resident.
        small_pages(p as usize, len);
        Some(Zeroed { ptr, len })
    }

    /// The first byte, aligned to the page.
    pub(crate) fn as_non_null(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The length of the mapping: whole pages, at least the size asked for.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Zeroed {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made, whose owner is being dropped, so
        // nothing refers to it any more. Were munmap(2) to fail, the pages
        // would stay mapped: a leak, never a dangling reference.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// How many of the pages that hold the `len` bytes at `start` are
/// resident (mincore(2)).
#[cfg(test)]
pub(crate) fn resident_pages(start: usize, len: usize) -> usize {
    let page = page_size();
    let first = start / page * page;
    let pages = (start + len).div_ceil(page) - first / page;
    let mut vec = vec![0u8; pages];
    // SAFETY: `vec` holds a byte for each page of the range, as mincore(2)
    // writes; `first` is aligned to the page, as it asks.
    let r = unsafe { libc::mincore(first as *mut libc::c_void, pages * page, vec.as_mut_ptr()) };
    assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
    // The least significant bit of each byte says whether the page is
    // resident; the others are undefined (mincore(2)).
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

/// Whether the mapping holding `addr` is kept in small pages: its
/// `VmFlags` in `/proc/self/smaps` include `nh`, the no-huge-page advise
/// flag (proc(5)). Always true on a kernel without transparent huge
/// pages, where there is nothing to keep it from.
#[cfg(test)]
pub(crate) fn in_small_pages(addr: usize) -> bool {
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        eprintln!("NOT CHECKED: this kernel has no transparent huge pages, so no mapping is kept from them");
        return true;
    }
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("reading /proc/self/smaps");
    let mut holds = false;
    for line in smaps.lines() {
        let range = line.split_whitespace().next().and_then(|r| r.split_once('-'));
        let bounds =
            range.and_then(|(s, e)| Some((usize::from_str_radix(s, 16).ok()?, usize::from_str_radix(e, 16).ok()?)));
        if let Some((start, end)) = bounds {
            holds = (start..end).contains(&addr);
        } else if let Some(flags) = line.strip_prefix("VmFlags:").filter(|_| holds) {
            return flags.split_whitespace().any(|f| f == "nh");
        }
    }
    panic!("no mapping holds {addr:#x}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_whole_pages_inside_the_range_are_advised() {
        let page = 4096;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks
        // touches no existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base as usize;
        // From half a page in to half a page before the end: the middle
        // two pages are the range's own, the first and the last are not.
        small_pages(base + page / 2, 3 * page);
        let advised: Vec<bool> = (0..4).map(|i| in_small_pages(base + i * page)).collect();
        // SAFETY: the mapping made above, used no more.
        unsafe { libc::munmap(base as *mut libc::c_void, 4 * page) };
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            assert_eq!(advised, [false, true, true, false]);
        } else {
            eprintln!("NOT CHECKED: this kernel has no transparent huge pages to advise against");
        }
    }
}
