//! Memory reserved at once and written a little at a time: the handle
//! space ([`crate::handle_space`]), the slots of the heap storage
//! ([`crate::capacity`]) and the per-slot locks ([`crate::lock`]). Each
//! is kept out of transparent huge pages, so that what is resident is
//! what was written (docs/c-abi.md, "Resident memory under churn").
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

/// Keep the whole pages among the `len` bytes at `start` in small pages
/// (madvise(2) `MADV_NOHUGEPAGE`). The memory must be the caller's own:
/// the pages touched are those lying wholly inside it.
pub(crate) fn small_pages(start: usize, len: usize) {
    // SAFETY: no pointers; the page size or -1.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1);
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
