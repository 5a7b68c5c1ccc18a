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
//!
//! A nice value was not enough: the kernel (PREEMPT_NONE, as most
//! servers') lets a thread in a long read or write run on, and a nice-10
//! pass still ran for 8.5 ms at a stretch while a FUSE thread and fio
//! waited 5 to 7 ms for that CPU, the other one idle (`perf sched
//! timehist`; seed 004's sequential max 3× the run without a cleaner).
//! So a pass runs in `SCHED_IDLE` (`Fs::clean_segments_placed`): a CPU
//! running only such a thread counts as idle when a writer wakes, and
//! the writer preempts it. A thread that has to wait for the pass (for
//! the state lock or the checkpoint lock it may hold, or for the space it
//! frees) first returns it to `SCHED_OTHER` at its nice value
//! ([`Inheritance`], priority inheritance by hand), and the pass goes
//! back to `SCHED_IDLE` where it next holds nothing and nobody waits
//! ([`Inheritance::relax`]): starved by unrelated work while holding a
//! lock, it would otherwise stall every writer behind it. With this,
//! seed 004's worst write with cleanerd was within the spread of the runs
//! without it (2.5-4.1 ms against 3.4-4.4 ms). A pass boosted only at
//! its lock-free phases still let writers wait 4 ms for a CPU at times:
//! its state-lock phases ran at nice 10.

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

/// True if a thread may leave `SCHED_IDLE` again (CAP_SYS_NICE, or an
/// RLIMIT_NICE that allows it), found once by a probe thread that tries.
/// Without it [`Inheritance::idle_holding`] does not use `SCHED_IDLE`: a pass stuck in it
/// would take the state lock at the idle priority.
fn idle_reversible() -> bool {
    static PROBE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PROBE.get_or_init(|| {
        let probe = std::thread::spawn(|| {
            set_policy(nix::libc::SCHED_IDLE).is_ok() && set_policy(nix::libc::SCHED_OTHER).is_ok()
        });
        let ok = probe.join().unwrap_or(false);
        if !ok {
            log::info!(
                "cleaning passes run at nice {CLEANING_NICE} only: this process may not \
                 leave SCHED_IDLE (no CAP_SYS_NICE), so it never enters it"
            );
        }
        ok
    })
}

/// Sets the calling thread's scheduling policy (priority 0, the only one
/// of the fair policies); the nice value is kept.
fn set_policy(policy: nix::libc::c_int) -> std::io::Result<()> {
    set_policy_of(0, policy)
}

/// Sets thread `tid`'s scheduling policy (0: the calling thread), as
/// [`set_policy`].
fn set_policy_of(tid: nix::libc::pid_t, policy: nix::libc::c_int) -> std::io::Result<()> {
    let param = nix::libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param that outlives the call; `tid`
    // is 0 (the calling thread) or a thread id, which at worst is stale
    // and makes the call fail.
    #[allow(unsafe_code)]
    let r = unsafe { nix::libc::sched_setscheduler(tid, policy, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Priority inheritance for work run in `SCHED_IDLE` that others may
/// have to wait for ([`Self::idle_holding`]; a cleaning pass): a thread
/// about to wait for it ([`Self::waiter`]) first puts the worker back in
/// `SCHED_OTHER`, so that the wait is as long as the work, not as long as
/// the CPUs take to be idle. (A pass starved by unrelated work while a
/// writer waited for the space it frees, or for the checkpoint lock it
/// holds, would stall that writer as long as the starvation lasts.)
#[derive(Debug, Default)]
pub struct Inheritance {
    /// The worker running in `SCHED_IDLE` (its thread id), or 0.
    idle_tid: std::sync::atomic::AtomicI32,
    /// Threads waiting for the work.
    waiters: std::sync::atomic::AtomicUsize,
}

/// A thread waiting for an [`Inheritance`]'s work, until dropped.
pub struct Waiter<'a>(&'a Inheritance);

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.0
            .waiters
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Inheritance {
    /// Runs `f` with the calling thread in `SCHED_IDLE` unless someone
    /// waits for the work (then, or from when someone starts to, in
    /// `SCHED_OTHER` at the thread's nice value), and returns the thread to
    /// `SCHED_OTHER` after, however `f` ends. Where the thread could not
    /// come back ([`idle_reversible`]), it never enters: `f` runs at the
    /// thread's nice value and no id is published, so neither
    /// [`Self::relax`] nor a waiter touches it.
    pub fn idle_holding<T>(&self, f: impl FnOnce() -> T) -> T {
        use std::sync::atomic::Ordering::SeqCst;
        struct Back<'a>(&'a std::sync::atomic::AtomicI32);
        impl Drop for Back<'_> {
            fn drop(&mut self) {
                self.0.store(0, SeqCst);
                if let Err(e) = set_policy(nix::libc::SCHED_OTHER) {
                    // The probe said it works; if it stops working the
                    // thread goes on at the idle priority: slow, not wrong.
                    log::warn!("cleaning pass: could not leave SCHED_IDLE: {e}");
                }
            }
        }
        if !idle_reversible() {
            return f();
        }
        if let Err(e) = set_policy(nix::libc::SCHED_IDLE) {
            log::debug!("cleaning pass: could not enter SCHED_IDLE: {e}");
            return f();
        }
        // A waiter raises the count before it reads the id, and the
        // worker publishes the id (SCHED_IDLE is already set) before it
        // reads the count: one of them sees the other, so either the
        // waiter raises the worker or the worker raises itself.
        self.idle_tid.store(nix::unistd::gettid().as_raw(), SeqCst);
        let _back = Back(&self.idle_tid);
        if self.waiters.load(SeqCst) > 0 {
            let _ = set_policy(nix::libc::SCHED_OTHER);
        }
        f()
    }

    /// Called by the worker inside [`Self::idle_holding`] where it holds
    /// nothing anyone waits for: back to `SCHED_IDLE` if nobody waits for
    /// it now. A no-op on any other thread, and outside `idle_holding`.
    pub fn relax(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        // No system call unless a worker is idling (every checkpoint
        // calls this).
        let tid = self.idle_tid.load(SeqCst);
        if tid == 0 || tid != nix::unistd::gettid().as_raw() {
            return;
        }
        // As at entry: set, then look for waiters, who look for the id
        // after they count themselves.
        if set_policy(nix::libc::SCHED_IDLE).is_ok() && self.waiters.load(SeqCst) > 0 {
            let _ = set_policy(nix::libc::SCHED_OTHER);
        }
    }

    /// Counts the caller as waiting for the work until the result is
    /// dropped, and returns a worker in `SCHED_IDLE` to `SCHED_OTHER`.
    pub fn waiter(&self) -> Waiter<'_> {
        use std::sync::atomic::Ordering::SeqCst;
        self.waiters.fetch_add(1, SeqCst);
        let tid = self.idle_tid.load(SeqCst);
        if tid != 0 {
            // Errors are ignored: the worker may have left its idle phase
            // (and even ended) since it was read; then there is nothing
            // to raise.
            let _ = set_policy_of(tid, nix::libc::SCHED_OTHER);
        }
        Waiter(self)
    }
}

/// The calling thread's scheduling policy.
#[cfg(test)]
fn my_policy() -> nix::libc::c_int {
    // SAFETY: plain integer argument; pid 0 is the calling thread.
    #[allow(unsafe_code)]
    unsafe {
        nix::libc::sched_getscheduler(0)
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

    /// Inside `idle_holding` the thread is SCHED_IDLE (where it may come
    /// back, as root can); after it, SCHED_OTHER at the nice value it had,
    /// also when `f` panics.
    #[test]
    fn idle_runs_f_in_sched_idle_and_comes_back() {
        std::thread::spawn(|| {
            let pi = Inheritance::default();
            lower_this_thread();
            let inside = pi.idle_holding(my_policy);
            assert_eq!(my_policy(), nix::libc::SCHED_OTHER);
            assert_eq!(my_nice(), CLEANING_NICE, "the nice value was lost");
            if idle_reversible() {
                assert_eq!(inside, nix::libc::SCHED_IDLE);
            } else {
                assert_eq!(inside, nix::libc::SCHED_OTHER);
            }
            let r = std::panic::catch_unwind(|| pi.idle_holding(|| panic!("in the idle phase")));
            assert!(r.is_err());
            assert_eq!(my_policy(), nix::libc::SCHED_OTHER, "a panic left it idle");
        })
        .join()
        .unwrap();
    }

    /// The tests run as root (fsd mounts need it), where leaving
    /// SCHED_IDLE is allowed: without this, the test above would only
    /// check the fallback.
    #[test]
    fn root_may_come_back_from_sched_idle() {
        assert!(
            idle_reversible(),
            "SCHED_IDLE cannot be left (the tests run as root, as fsd does)"
        );
    }

    /// A thread that waits for the work (here, a lock its worker holds)
    /// returns the idle worker to SCHED_OTHER at once; without waiters the
    /// worker stays idle.
    #[test]
    fn a_waiter_returns_the_idle_holder_to_sched_other() {
        use std::sync::{Arc, Barrier, Mutex};
        let pi = Arc::new(Inheritance::default());
        let lock = Arc::new(Mutex::new(()));
        let held = Arc::new(Barrier::new(2));
        let waiting = Arc::new(Barrier::new(2));
        let holder = {
            let (pi, lock, held, waiting) =
                (pi.clone(), lock.clone(), held.clone(), waiting.clone());
            std::thread::spawn(move || {
                let _g = lock.lock().unwrap();
                pi.idle_holding(|| {
                    let before = my_policy();
                    held.wait();
                    waiting.wait();
                    // The waiter has boosted us before it blocks.
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while my_policy() != nix::libc::SCHED_OTHER
                        && std::time::Instant::now() < deadline
                    {
                        std::thread::yield_now();
                    }
                    (before, my_policy())
                })
            })
        };
        held.wait();
        let w = {
            let (pi, lock, waiting) = (pi.clone(), lock.clone(), waiting.clone());
            std::thread::spawn(move || {
                let _w = pi.waiter();
                waiting.wait();
                drop(lock.lock().unwrap());
            })
        };
        let (before, after) = holder.join().unwrap();
        w.join().unwrap();
        assert_eq!(
            before,
            nix::libc::SCHED_IDLE,
            "no waiter yet: the holder should be idle"
        );
        assert_eq!(
            after,
            nix::libc::SCHED_OTHER,
            "the waiter did not boost the holder"
        );
    }

    /// `relax` returns the worker to SCHED_IDLE only when nobody waits,
    /// and does nothing on another thread.
    #[test]
    fn relax_goes_back_to_idle_only_without_waiters() {
        let pi = Inheritance::default();
        std::thread::scope(|s| {
            s.spawn(|| {
                pi.idle_holding(|| {
                    assert_eq!(my_policy(), nix::libc::SCHED_IDLE);
                    let w = pi.waiter();
                    assert_eq!(my_policy(), nix::libc::SCHED_OTHER, "not raised");
                    pi.relax();
                    assert_eq!(my_policy(), nix::libc::SCHED_OTHER, "idle with a waiter");
                    drop(w);
                    pi.relax();
                    assert_eq!(my_policy(), nix::libc::SCHED_IDLE, "not relaxed");
                });
                assert_eq!(my_policy(), nix::libc::SCHED_OTHER);
            });
        });
        // Not the worker: nothing changes.
        pi.relax();
        assert_eq!(my_policy(), nix::libc::SCHED_OTHER);
    }
}
