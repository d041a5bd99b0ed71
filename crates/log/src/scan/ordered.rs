//! Work on several threads, its results taken in order: the machinery of [`super::many`] (many
//! files) and [`super::chunked`] (the chunks of one file).

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, mpsc};

/// Which item the workers take next, how far the folding got, and whether to stop.
struct Queue {
    next: usize,
    folded: usize,
    stop: bool,
}

/// Runs `work(i)` for every `i` in `0..count` on up to `workers` threads and calls
/// `fold(i, result)` on the calling thread strictly in order of `i`. A worker does not start an
/// item more than `ahead` per worker past the first one not yet folded, so at most that many
/// results wait at once. The first error of `fold` stops the workers (items being worked on
/// are finished) and is returned.
pub fn ordered<T: Send, E>(
    count: usize,
    workers: usize,
    ahead: usize,
    work: impl Fn(usize) -> T + Sync,
    mut fold: impl FnMut(usize, T) -> Result<(), E>,
) -> Result<(), E> {
    let workers = workers.min(count).max(1);
    let window = workers * ahead.max(1);
    let queue = Mutex::new(Queue {
        next: 0,
        folded: 0,
        stop: false,
    });
    let turn = Condvar::new();
    let (tx, rx) = mpsc::channel::<(usize, T)>();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (queue, turn, work) = (&queue, &turn, &work);
            scope.spawn(move || {
                loop {
                    let index = {
                        let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
                        while !q.stop && q.next < count && q.next >= q.folded + window {
                            q = turn.wait(q).unwrap_or_else(|e| e.into_inner());
                        }
                        if q.stop || q.next >= count {
                            return;
                        }
                        q.next += 1;
                        q.next - 1
                    };
                    if tx.send((index, work(index))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        let result = (|| {
            let mut waiting = BTreeMap::new();
            for done in 0..count {
                let outcome = loop {
                    if let Some(outcome) = waiting.remove(&done) {
                        break outcome;
                    }
                    // Workers return only after handing over every item or after a stop, which
                    // ends this loop first; a worker that panicked re-raises at the scope's end.
                    let Ok((index, outcome)) = rx.recv() else {
                        return Ok(());
                    };
                    waiting.insert(index, outcome);
                };
                fold(done, outcome)?;
                queue.lock().unwrap_or_else(|e| e.into_inner()).folded = done + 1;
                turn.notify_all();
            }
            Ok(())
        })();
        if result.is_err() {
            queue.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
            turn.notify_all();
        }
        result
    })
}
