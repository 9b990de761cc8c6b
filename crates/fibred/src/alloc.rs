//! How the daemon asks the C allocator to behave, for the way its threads share memory.
//!
//! Memory crosses threads on every request: a client thread allocates the requests it reads
//! ([`crate::engine::Prepared`]) and the writer frees them; the writer allocates the answers
//! and the client thread frees them; the FIB copies grow on the writer. glibc gives each
//! thread its own arena by default, and then each arena grows, trims and regrows by small
//! steps (an `mprotect` per step, fresh pages faulted in) while memory freed into the other
//! thread's arena sits unused. A table load over the ring paid about a third of the writer's
//! CPU time for it (40,000 `mprotect` calls and 90,000 more page faults per load of the IPv4
//! table; see RESULTS.md). One arena, grown in large steps, reuses what any thread freed.
//!
//! [`tune`] changes process-wide settings, so it runs before the daemon starts its threads
//! ([`crate::Daemon::start`]); the arenas other threads made before it keep serving them.

/// Arenas glibc may create: one, shared by every thread. The daemon's threads hand memory to
/// each other; a thread that allocates little (clients) or much (the writer) takes the lock of
/// the one arena for a few nanoseconds, which costs less than the arenas' growth and trim.
const ARENA_MAX: i32 = 1;

/// Bytes glibc adds to every growth of the heap, and keeps at its top when it trims it:
/// growing a FIB by hundreds of megabytes then takes a few `brk` calls instead of tens of
/// thousands. The growth is address space only (pages are faulted in as they are used); what
/// a trim keeps is at most this much memory that was in use, against the hundreds of
/// megabytes a full table takes.
const TOP_PAD: i32 = 64 << 20;

/// Applies the settings above; has no effect with allocators other than glibc's.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it has no memory-safety preconditions.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
        libc::mallopt(libc::M_TOP_PAD, TOP_PAD);
    }
}
