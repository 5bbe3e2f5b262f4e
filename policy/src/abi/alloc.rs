//! The module's one allocator: a bump pointer that is also the ABI's heap pointer.
//!
//! Hosts treat `opa_heap_ptr_get/set` as the whole allocator state: they save the pointer after
//! loading data and rewind to it before every evaluation, write input bytes raw above it, and may
//! grow memory themselves. A free-list allocator (dlmalloc) would keep bookkeeping in the heap
//! that those rewinds corrupt, so the `#[global_allocator]` is this bump pointer and nothing else.
//! Freeing the most recent block moves the pointer back (LIFO), and growing the most recent
//! block extends it in place, which keeps `Vec`/`String` growth linear.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;

use super::abort;

const PAGE_SIZE: u64 = 65536;
/// Byte addresses in wasm32 memory are below this.
const ADDRESS_SPACE: u64 = 1 << 32;
/// Free memory `opa_heap_ptr_get` tries to keep above the pointer. wasmer-py and opa-wasmtime
/// write input there without growing memory first; 4 MiB covers large admission requests.
const HEADROOM: u64 = 4 << 20;
/// Alignment of `opa_malloc` blocks: enough for any value the host might store there.
const MALLOC_ALIGN: usize = 8;

unsafe extern "C" {
    /// First byte after the stack and static data; defined by the linker.
    static __heap_base: u8;
}

/// Next free byte. Zero (from `.bss`) until first use, meaning "at `__heap_base`".
static mut HEAP_POINTER: usize = 0;

fn heap_base() -> usize {
    // Only the address of the linker symbol is taken, never its contents.
    &raw const __heap_base as usize
}

pub(super) fn heap_pointer() -> usize {
    // SAFETY: single-threaded module; the static is read by value.
    match unsafe { HEAP_POINTER } {
        0 => heap_base(),
        pointer => pointer,
    }
}

/// Moves the heap pointer. Values above the current pointer and beyond the end of memory are
/// accepted (memory grows on the next allocation); values below `__heap_base` would hand out the
/// stack and static data, so they are raised to it.
pub(super) fn set_heap_pointer(address: usize) {
    // SAFETY: single-threaded module; the static is written by value.
    unsafe { HEAP_POINTER = address.max(heap_base()) };
}

/// Makes sure memory reaches `end` (exclusive), growing it when needed. Memory size is read
/// fresh each time because hosts grow memory behind the module's back.
fn reach(end: u64) -> bool {
    let size = wasm32::memory_size::<0>() as u64 * PAGE_SIZE;
    if end <= size {
        return true;
    }
    let missing_pages = (end - size).div_ceil(PAGE_SIZE);
    wasm32::memory_grow::<0>(missing_pages as usize) != usize::MAX
}

fn out_of_memory() -> ! {
    abort(c"meshlife: out of memory")
}

/// Moves the pointer to `end`, growing memory; aborts when memory cannot grow that far.
#[inline(never)]
fn claim_until(end: u64) {
    if end >= ADDRESS_SPACE || !reach(end) {
        out_of_memory();
    }
    set_heap_pointer(end as usize);
}

// Kept out of line: LTO would otherwise inline the memory checks into every allocation site.
#[inline(never)]
pub(super) fn allocate(size: usize, align: usize) -> *mut u8 {
    // The pointer a host sets may be odd: align on every call.
    let start = (heap_pointer() as u64).next_multiple_of(align as u64);
    claim_until(start + size as u64);
    start as *mut u8
}

/// Gives a block back when it is the most recent one; otherwise it stays until the host rewinds.
fn release(block: *mut u8, size: usize) {
    if block as usize + size == heap_pointer() {
        set_heap_pointer(block as usize);
    }
}

pub struct BumpAllocator;

#[global_allocator]
static ALLOCATOR: BumpAllocator = BumpAllocator;

// SAFETY: blocks never overlap: each starts at or above the pointer, which then moves past it;
// the pointer only moves back over a block that its owner freed or shrank.
unsafe impl GlobalAlloc for BumpAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        allocate(layout.size(), layout.align())
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        release(block, layout.size());
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let start = block as usize;
        if start + layout.size() == heap_pointer() {
            // The most recent block grows or shrinks where it is.
            claim_until(start as u64 + new_size as u64);
            return block;
        }
        if new_size <= layout.size() {
            return block;
        }
        let moved = allocate(new_size, layout.align());
        // SAFETY: `moved` is a fresh block above every live one, so the two do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(block, moved, layout.size()) };
        moved
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn opa_malloc(size: usize) -> *mut u8 {
    allocate(size, MALLOC_ALIGN)
}

/// Blocks are reclaimed when the host rewinds the heap pointer. Hosts free the input buffer they
/// wrote, but the module copies input out of it first, so freeing nothing is safe.
#[unsafe(no_mangle)]
pub extern "C" fn opa_free(_block: *mut u8) {}

#[unsafe(no_mangle)]
pub extern "C" fn opa_heap_ptr_get() -> usize {
    let pointer = heap_pointer();
    // Best effort only: a host may cap memory (npm with `maximum: 8`), and hosts that write
    // input without growing memory are the only ones that need the room.
    let _ = reach((pointer as u64 + HEADROOM).min(ADDRESS_SPACE - 1));
    pointer
}

#[unsafe(no_mangle)]
pub extern "C" fn opa_heap_ptr_set(address: usize) {
    set_heap_pointer(address);
}

/// OPA's own allocator keeps free lists that hosts stash around data updates. A bump allocator
/// has none, so there is nothing to stash, restore or clear; the exports exist because OPA's Go
/// host calls them.
#[unsafe(no_mangle)]
pub extern "C" fn opa_heap_blocks_stash() {}

#[unsafe(no_mangle)]
pub extern "C" fn opa_heap_blocks_restore() {}

#[unsafe(no_mangle)]
pub extern "C" fn opa_heap_stash_clear() {}
