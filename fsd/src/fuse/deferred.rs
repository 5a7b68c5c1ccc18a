//! Changes that arrive while the filesystem is frozen.
//!
//! A change made while frozen waits in the engine until the thaw. Made on
//! a FUSE request thread, a few such waits would take every request
//! thread and stop reads too; so the adapter hands each one (a closure
//! owning its arguments and its reply) to these workers, which wait
//! instead. Their number is fixed: more waiting changes queue here, and
//! cost memory only (their arguments; a write's data is copied only when
//! it is deferred).
//!
//! Invariant: a job is run exactly once, by one worker, after which its
//! reply has been sent; [`Deferred::shutdown`] runs what is queued before
//! it returns (the caller thaws first, or it would wait for the thaw).

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use log::error;

/// A change with its arguments and reply.
pub type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The workers that run changes deferred by a freeze.
pub struct Deferred {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deferred")
            .field("queued", &self.shared.lock().jobs.len())
            .finish_non_exhaustive()
    }
}

impl Deferred {
    /// Starts `workers` (at least one) idle workers.
    pub fn start(workers: usize) -> io::Result<Deferred> {
        let shared = Arc::new(Shared::default());
        let handles = (0..workers.max(1))
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("fsd-frozen-{i}"))
                    .spawn(move || work(&shared))
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Deferred {
            shared,
            workers: Mutex::new(handles),
        })
    }

    /// Queues `job` for a worker. After [`Self::shutdown`] it runs on the
    /// caller's thread instead (no change is ever dropped unanswered).
    pub fn push(&self, job: Job) {
        let mut q = self.shared.lock();
        if q.closed {
            drop(q);
            job();
            return;
        }
        q.jobs.push_back(job);
        self.shared.ready.notify_one();
    }

    /// Runs what is queued, then stops the workers and waits for them.
    pub fn shutdown(&self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|p| p.into_inner()));
        for w in workers {
            if w.join().is_err() {
                error!("a worker running deferred changes panicked");
            }
        }
    }
}

fn work(shared: &Shared) {
    loop {
        let job = {
            let mut q = shared.lock();
            loop {
                if let Some(job) = q.jobs.pop_front() {
                    break job;
                }
                if q.closed {
                    return;
                }
                q = shared.ready.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        job();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn jobs_run_on_the_workers_and_shutdown_runs_what_is_queued() {
        let d = Deferred::start(2).unwrap();
        let (gate_tx, gate_rx) = mpsc::channel::<()>();
        let gate_rx = Arc::new(Mutex::new(gate_rx));
        let ran = Arc::new(AtomicUsize::new(0));
        // Two jobs that block both workers, and three queued behind them.
        for _ in 0..5 {
            let (gate_rx, ran) = (gate_rx.clone(), ran.clone());
            d.push(Box::new(move || {
                let _ = gate_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10));
                ran.fetch_add(1, Ordering::SeqCst);
            }));
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "a job did not wait");
        for _ in 0..5 {
            gate_tx.send(()).unwrap();
        }
        d.shutdown();
        assert_eq!(ran.load(Ordering::SeqCst), 5);
        // After shutdown a job runs at once, on the caller's thread.
        let here = std::thread::current().id();
        let (tx, rx) = mpsc::channel();
        d.push(Box::new(move || {
            tx.send(std::thread::current().id()).unwrap()
        }));
        assert_eq!(rx.recv().unwrap(), here);
    }
}
