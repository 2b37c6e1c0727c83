//! The test binary's global allocator: the system's, counting the bytes each thread allocates,
//! so a test can measure what a call costs in memory whatever other tests run beside it.

// Implementing an allocator is unsafe by definition; this one only forwards to the system's.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

pub(crate) struct CountingAllocator;

thread_local! {
    // Const-initialised and without a destructor: reading it never allocates.
    static ALLOCATED_BYTES: Cell<u64> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    // Gone while the thread is being torn down: those bytes are nobody's measurement.
    let _ = ALLOCATED_BYTES.try_with(|c| c.set(c.get() + bytes as u64));
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size.saturating_sub(layout.size()));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes this thread has allocated so far (a reallocation counts what it grew by).
pub(crate) fn allocated_bytes() -> u64 {
    ALLOCATED_BYTES.with(Cell::get)
}
