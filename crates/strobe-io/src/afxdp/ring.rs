//! The four single-producer/single-consumer rings an AF_XDP socket shares with the kernel.
//!
//! Each ring is a power-of-two array of descriptors plus free-running 32-bit producer and
//! consumer indices in shared memory. The side that produces writes descriptors, then
//! publishes them with a release store of the producer index; the side that consumes reads
//! the producer index with an acquire load before reading descriptors, and hands slots back
//! with a release store of the consumer index once it has read them. Each side caches the
//! other side's index and reloads it only when the cached view runs short.

use std::marker::PhantomData;
use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, AtomicU32, Ordering};

use super::sys::Mmap;

/// Where the parts of one ring lie in its mapping (from XDP_MMAP_OFFSETS).
#[derive(Clone, Copy, Debug)]
pub(super) struct RingOffsets {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    /// None on kernels before need_wakeup (their offsets structure has no flags field).
    pub flags: Option<u64>,
}

/// Shared state of one mapped ring.
struct Ring<T> {
    /// Keeps the shared memory the pointers below point into mapped.
    _map: Mmap,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: Option<*const AtomicU32>,
    descs: *mut T,
    mask: u32,
}

// SAFETY: the raw pointers point into `_map`, which moves with the ring; a ring is used by
// one thread at a time (the half that owns it), and the indices are atomics.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    fn map(
        fd: &OwnedFd,
        page_offset: u64,
        entries: u32,
        off: RingOffsets,
    ) -> std::io::Result<Self> {
        let len = off.desc as usize + entries as usize * std::mem::size_of::<T>();
        let map = Mmap::shared(fd, len, page_offset)?;
        let base = map.as_ptr();
        let field = |offset: u64| {
            debug_assert!(offset as usize + 4 <= map.len());
            // SAFETY: the kernel placed this u32 inside the mapping at `offset`, 4-aligned.
            unsafe { base.add(offset as usize) }
                .cast::<AtomicU32>()
                .cast_const()
        };
        Ok(Ring {
            producer: field(off.producer),
            consumer: field(off.consumer),
            flags: off.flags.map(field),
            // SAFETY: the descriptor array starts at `desc` and holds `entries` items.
            descs: unsafe { base.add(off.desc as usize) }.cast(),
            mask: entries - 1,
            _map: map,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into `self._map`, alive as long as self; the kernel only ever
        // accesses it atomically.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    fn size(&self) -> u32 {
        self.mask + 1
    }
}

/// One side's handle on a mapped ring: the ring and this process's view of both indices.
/// `Side` says which index is ours ([`Produces`] or [`Consumes`]) and so which methods exist.
pub(super) struct RingHalf<T, Side> {
    ring: Ring<T>,
    /// The producer index: ours in a [`Producer`] (published by `submit`), the kernel's as
    /// last seen in a [`Consumer`].
    cached_prod: u32,
    /// The consumer index: the kernel's as last seen in a [`Producer`], ours in a
    /// [`Consumer`] (published by `release`).
    cached_cons: u32,
    _side: PhantomData<Side>,
}

/// The side of a ring this process fills.
pub(super) struct Produces;
/// The side of a ring this process drains.
pub(super) struct Consumes;

/// A ring this process fills and the kernel drains (the fill ring and the TX ring).
pub(super) type Producer<T> = RingHalf<T, Produces>;
/// A ring the kernel fills and this process drains (the RX ring and the completion ring).
pub(super) type Consumer<T> = RingHalf<T, Consumes>;

impl<T: Copy, Side> RingHalf<T, Side> {
    pub(super) fn map(
        fd: &OwnedFd,
        page_offset: u64,
        entries: u32,
        off: RingOffsets,
    ) -> std::io::Result<Self> {
        let ring = Ring::map(fd, page_offset, entries, off)?;
        // Acquire on both, as every load of the kernel's index is (once per mapping: on our
        // own index it costs nothing that matters).
        let cached_prod = ring.producer().load(Ordering::Acquire);
        let cached_cons = ring.consumer().load(Ordering::Acquire);
        Ok(RingHalf {
            ring,
            cached_prod,
            cached_cons,
            _side: PhantomData,
        })
    }
}

impl<T: Copy> Producer<T> {
    /// Free entries, at least `want` if the kernel has made that much room. The acquire
    /// load orders our next descriptor writes after the kernel's reads of those slots.
    pub(super) fn free(&mut self, want: u32) -> u32 {
        let free = self.ring.size() - self.cached_prod.wrapping_sub(self.cached_cons);
        if free >= want {
            return free;
        }
        self.cached_cons = self.ring.consumer().load(Ordering::Acquire);
        self.ring.size() - self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Writes entry `i` past the producer index; the caller checked `i < free()`.
    pub(super) fn write(&mut self, i: u32, value: T) {
        let slot = (self.cached_prod.wrapping_add(i) & self.ring.mask) as usize;
        // SAFETY: slot < ring size, and slots past the producer index up to the free count
        // belong to us until `submit` publishes them.
        unsafe { self.ring.descs.add(slot).write(value) };
    }

    /// Publishes `n` written entries to the kernel.
    pub(super) fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.ring
            .producer()
            .store(self.cached_prod, Ordering::Release);
    }

    /// Whether the kernel asked to be woken (need_wakeup); always true on kernels without
    /// the flag, which need a wake-up every time.
    pub(super) fn needs_wakeup(&self) -> bool {
        let Some(flags) = self.ring.flags else {
            return true;
        };
        // A store followed by a load of another location may be reordered even on x86: the
        // full fence keeps the flag load after our producer store, so a flag the kernel set
        // while our entries were becoming visible is never missed.
        fence(Ordering::SeqCst);
        // SAFETY: the flags word lies in the mapping (see `Ring::map`).
        let flags = unsafe { &*flags };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Entries published but not yet consumed by the kernel, as last seen.
    pub(super) fn pending(&mut self) -> u32 {
        self.cached_cons = self.ring.consumer().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }
}

impl<T: Copy> Consumer<T> {
    /// Entries ready to read, up to `max`. Reloads the kernel's producer index (acquire, so
    /// the descriptors it published are visible) only when the cached view is empty.
    pub(super) fn available(&mut self, max: u32) -> u32 {
        let mut ready = self.cached_prod.wrapping_sub(self.cached_cons);
        if ready == 0 {
            self.cached_prod = self.ring.producer().load(Ordering::Acquire);
            ready = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        ready.min(max)
    }

    /// Reads entry `i` past the consumer index; the caller checked `i < available()`.
    pub(super) fn read(&self, i: u32) -> T {
        let slot = (self.cached_cons.wrapping_add(i) & self.ring.mask) as usize;
        // SAFETY: slot < ring size, and the kernel published this entry (acquire load in
        // `available`) and will not rewrite it before `release`.
        unsafe { self.ring.descs.add(slot).read() }
    }

    /// Hands `n` read entries back to the kernel; the release store keeps our reads of them
    /// before the kernel's next writes.
    pub(super) fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.ring
            .consumer()
            .store(self.cached_cons, Ordering::Release);
    }
}
