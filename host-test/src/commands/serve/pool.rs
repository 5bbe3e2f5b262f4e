//! The evaluation pool: a fixed set of worker threads, each ending up with its own warm module
//! instance, fed through a bounded admission count so that a burst is refused at once instead
//! of queueing without limit. A large key is evaluated on these threads, never on the async
//! ones, so a long evaluation cannot stall accepting, TLS or the health port. With the
//! embedded module, whose time per byte is known and fuzzed, a small key (at most
//! [`IN_PLACE_KEY_BYTES`]) is evaluated where it arrived: its evaluation is shorter than the
//! two thread wake-ups a hop to a worker and back costs (profiled under `meshlife bench
//! serve`, docs/performance-history.md), and its deadline holds the same way. A `--module`
//! of unknown speed always goes to the workers.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::metrics::Metrics;
use crate::module::engine::{Engine, EvaluationFailure};

/// How often the epoch advances; deadlines are whole ticks, so this is their resolution.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Keys up to this size are evaluated on the thread that read them, with the embedded module.
/// It reads about 3 us per KB, so such a key holds an async thread for about 0.2 ms at most.
pub const IN_PLACE_KEY_BYTES: usize = 64 * 1024;

/// What became of one key.
#[derive(Debug)]
pub enum KeyOutcome {
    /// The module's result set as JSON text.
    Evaluated(String),
    Failed(EvaluationFailure),
}

struct Job {
    input: Arc<String>,
    reply: oneshot::Sender<KeyOutcome>,
    /// Held until the answer is sent: the admission count covers queued and running keys.
    _permit: OwnedSemaphorePermit,
}

pub struct EvaluationPool {
    engine: Arc<Engine>,
    metrics: Arc<Metrics>,
    deadline_ticks: u64,
    /// Keys up to this size are evaluated in place; 0: every key goes to a worker.
    in_place_key_bytes: usize,
    jobs: mpsc::Sender<Job>,
    admission: Arc<Semaphore>,
    capacity: usize,
}

/// Keys a request may have evaluated; obtained all at once or not at all. Slots not used
/// (the request failed half-way, or its client left) return to the pool when it is dropped.
pub struct Admission {
    permits: Vec<OwnedSemaphorePermit>,
}

/// A key on its way through the pool.
pub enum PendingKey {
    /// Evaluated in place (a small key).
    Done(KeyOutcome),
    Queued(oneshot::Receiver<KeyOutcome>),
    Failed(&'static str),
}

impl PendingKey {
    pub async fn outcome(self) -> KeyOutcome {
        match self {
            PendingKey::Done(outcome) => outcome,
            PendingKey::Queued(answer) => answer.await.unwrap_or_else(|_| {
                KeyOutcome::Failed(EvaluationFailure::Failed(
                    "the evaluation worker failed before answering".into(),
                ))
            }),
            PendingKey::Failed(message) => {
                KeyOutcome::Failed(EvaluationFailure::Failed(message.into()))
            }
        }
    }
}

/// Why a request's keys were not admitted.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Workers and queue are full.
    Overloaded { capacity: usize },
    /// One batch holds more keys than the queue can ever take.
    BatchTooLarge { keys: usize, capacity: usize },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Overloaded { capacity } => write!(
                formatter,
                "meshlife is overloaded: its {capacity} evaluation slots (workers and queue) are all \
                 taken; retry, or add replicas or workers"
            ),
            Refusal::BatchTooLarge { keys, capacity } => write!(
                formatter,
                "a batch of {keys} keys exceeds the {capacity} evaluation slots (workers and queue); \
                 raise --queue"
            ),
        }
    }
}

impl EvaluationPool {
    /// Starts `workers` threads over `engine` and the epoch ticker that enforces
    /// `eval_timeout` (the engine must be interruptible). Keys up to `in_place_key_bytes` are
    /// evaluated in place (0: none).
    pub fn start(
        engine: Arc<Engine>,
        in_place_key_bytes: usize,
        workers: usize,
        queue: usize,
        eval_timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<EvaluationPool> {
        let workers = workers.max(1);
        let (jobs, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let deadline_ticks = eval_timeout.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64 + 1;
        for index in 0..workers {
            let receiver = Arc::clone(&receiver);
            let engine = Arc::clone(&engine);
            let metrics = Arc::clone(&metrics);
            std::thread::Builder::new()
                .name(format!("meshlife-eval-{index}"))
                .spawn(move || work(&engine, &receiver, deadline_ticks, &metrics))?;
        }
        let ticking_engine = Arc::clone(&engine);
        std::thread::Builder::new()
            .name("meshlife-epoch".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    ticking_engine.increment_epoch();
                }
            })?;
        metrics.workers.store(workers as i64, Ordering::Relaxed);
        let capacity = workers + queue;
        Ok(EvaluationPool {
            engine,
            metrics,
            deadline_ticks,
            in_place_key_bytes,
            jobs,
            admission: Arc::new(Semaphore::new(capacity)),
            capacity,
        })
    }

    /// Reserves a slot for each of `keys` keys, or refuses the whole request.
    pub fn admit(&self, keys: usize) -> Result<Admission, Refusal> {
        if keys > self.capacity {
            return Err(Refusal::BatchTooLarge {
                keys,
                capacity: self.capacity,
            });
        }
        let permits = Arc::clone(&self.admission)
            .try_acquire_many_owned(keys as u32)
            .map_err(|_| Refusal::Overloaded {
                capacity: self.capacity,
            })?;
        let mut permits = permits;
        let split = (0..keys)
            .map(|_| permits.split(1).expect("one permit per admitted key"))
            .collect();
        Ok(Admission { permits: split })
    }

    /// Evaluates `input` on one of `admission`'s slots: in place when it is small, else
    /// queued for a worker; the large keys of one request are all queued before any answer is
    /// awaited, so they are evaluated in parallel.
    pub fn submit(&self, admission: &mut Admission, input: Arc<String>) -> PendingKey {
        let Some(permit) = admission.permits.pop() else {
            return PendingKey::Failed("internal error: more keys evaluated than admitted");
        };
        if input.len() <= self.in_place_key_bytes {
            let outcome = evaluate(&self.engine, &input, self.deadline_ticks, &self.metrics);
            drop(permit);
            return PendingKey::Done(outcome);
        }
        let (reply, answer) = oneshot::channel();
        let job = Job {
            input,
            reply,
            _permit: permit,
        };
        match self.jobs.send(job) {
            Ok(()) => PendingKey::Queued(answer),
            Err(_) => PendingKey::Failed("the evaluation workers have stopped"),
        }
    }

    /// Slots taken by keys being evaluated or waiting.
    pub fn busy_slots(&self) -> usize {
        self.capacity - self.admission.available_permits()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

fn work(engine: &Engine, receiver: &Mutex<mpsc::Receiver<Job>>, ticks: u64, metrics: &Metrics) {
    loop {
        let job = {
            let Ok(receiver) = receiver.lock() else {
                return;
            };
            match receiver.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        // The client went away (timeout, closed connection): nobody reads this answer.
        if job.reply.is_closed() {
            continue;
        }
        let _ = job.reply.send(evaluate(engine, &job.input, ticks, metrics));
    }
}

/// One evaluation under its deadline, timed; a failed instance is counted (the engine has
/// dropped it).
fn evaluate(engine: &Engine, input: &str, ticks: u64, metrics: &Metrics) -> KeyOutcome {
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        engine.evaluate_raw(input.as_bytes(), ticks)
    }))
    .unwrap_or_else(|_| {
        Err(EvaluationFailure::Failed(
            "internal error: the evaluation panicked".into(),
        ))
    });
    metrics.evaluation_seconds.observe(started.elapsed());
    match outcome {
        Ok(text) => KeyOutcome::Evaluated(text),
        Err(failure) => {
            metrics.instances_discarded.fetch_add(1, Ordering::Relaxed);
            KeyOutcome::Failed(failure)
        }
    }
}
