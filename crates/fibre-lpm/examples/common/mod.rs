//! What the lookup examples share.

/// This thread's CPU time in seconds (`CLOCK_THREAD_CPUTIME_ID`). Rates are per CPU second,
/// not per wall second, so that time slices lost to other processes on a shared machine do not
/// count against the code.
pub fn cpu_seconds() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    /// Linux's CLOCK_THREAD_CPUTIME_ID.
    const THREAD_CPUTIME: i32 = 3;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec (two C longs on x86_64/aarch64 Linux) into the
    // valid, exclusively borrowed `ts`.
    let rc = unsafe { clock_gettime(THREAD_CPUTIME, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}
