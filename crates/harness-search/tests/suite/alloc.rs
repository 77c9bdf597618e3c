//! A counting allocator for the test binary: bytes allocated by the calling thread, so the
//! tests running at once on other threads do not count.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static BYTES: Cell<usize> = const { Cell::new(0) };
}

fn add(n: usize) {
    let _ = BYTES.try_with(|b| b.set(b.get() + n));
}

// SAFETY: every call is passed to the system allocator unchanged; the count is a
// thread-local cell without a destructor (no allocation, usable at any time).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr came from System with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        add(new_size);
        // SAFETY: ptr came from System with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes this thread has allocated so far.
pub fn allocated() -> usize {
    BYTES.try_with(Cell::get).unwrap_or(0)
}
