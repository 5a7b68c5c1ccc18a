//! Cleaning runs behind the writers: the thread making a pass lowers its
//! own CPU priority first.
//!
//! A pass verifies and copies whole segments (and checksums what it
//! writes): tens of milliseconds of CPU in bursts. On a machine with few
//! cores that burst made the writers wait for a CPU (seed 004 with
//! cleanerd: writes of 4 to 10 ms at every pass, about 2 ms without, with
//! the state lock held for about a millisecond per pass). A thread with a
//! higher nice value yields to them as soon as they wake.
//!
//! The nice value is per thread on Linux (`setpriority(PRIO_PROCESS,
//! tid)`), so only the connection thread that runs the pass is affected;
//! it is not restored afterwards (lowering a nice value needs
//! CAP_SYS_NICE), which only affects later requests on that connection,
//! cleanerd's own.

/// The nice value a cleaning pass runs at (0 is the default, 19 the
/// lowest priority): far enough below the writers that they preempt it,
/// not so far that a pass holding the state lock is starved by unrelated
/// work.
pub const CLEANING_NICE: i32 = 10;

/// Raises the calling thread's nice value to [`CLEANING_NICE`] unless it
/// is already at least that. Failure (a seccomp filter, say) only costs
/// the writers some latency, so it is logged, not returned.
pub fn lower_this_thread() {
    let tid = nix::unistd::gettid().as_raw();
    // SAFETY: getpriority/setpriority take plain integers and touch no
    // memory of ours. errno is cleared first because -1 is a valid
    // getpriority result.
    #[allow(unsafe_code)]
    let (now, set) = unsafe {
        *nix::libc::__errno_location() = 0;
        let now = nix::libc::getpriority(nix::libc::PRIO_PROCESS, tid as nix::libc::id_t);
        if now >= CLEANING_NICE && *nix::libc::__errno_location() == 0 {
            return;
        }
        let set = nix::libc::setpriority(
            nix::libc::PRIO_PROCESS,
            tid as nix::libc::id_t,
            CLEANING_NICE,
        );
        (now, set)
    };
    if set != 0 {
        log::debug!(
            "cleaning pass: could not lower thread {tid}'s priority from nice {now} to {CLEANING_NICE}: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nice value of the calling thread, from /proc (field 19 of its
    /// stat, the 17th after the parenthesised name).
    fn my_nice() -> i32 {
        let tid = nix::unistd::gettid().as_raw();
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        let after = stat.rsplit(')').next().unwrap();
        after.split_whitespace().nth(16).unwrap().parse().unwrap()
    }

    #[test]
    fn lowers_only_the_calling_thread() {
        let lowered = std::thread::spawn(|| {
            lower_this_thread();
            my_nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, CLEANING_NICE);
        let nice = my_nice();
        assert!(
            nice < CLEANING_NICE,
            "the test's own thread was lowered too: {nice}"
        );
    }
}
