//! Prometheus text exposition (format 0.0.4) of what the server does, from atomics and one
//! small lock per labelled family: cheap enough to update on every key.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds in seconds: evaluations take microseconds, requests up to the 2 s Provider
/// timeout, so the buckets span 10 µs to 2.5 s.
const BUCKETS: [f64; 16] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 1.0, 2.5,
];

pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    /// Observations above the last bucket.
    overflow: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            overflow: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        match BUCKETS.iter().position(|&bound| seconds <= bound) {
            Some(index) => self.counts[index].fetch_add(1, Ordering::Relaxed),
            None => self.overflow.fetch_add(1, Ordering::Relaxed),
        };
        self.sum_nanos
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let separator = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{separator}le=\"{bound}\"}} {cumulative}"
            );
        }
        cumulative += self.overflow.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{separator}le=\"+Inf\"}} {cumulative}"
        );
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let braces = |labels: &str| {
            if labels.is_empty() {
                String::new()
            } else {
                format!("{{{labels}}}")
            }
        };
        let _ = writeln!(out, "{name}_sum{} {sum}", braces(labels));
        let _ = writeln!(out, "{name}_count{} {cumulative}", braces(labels));
    }
}

/// Counters keyed by their label values, in a fixed label order.
#[derive(Default)]
struct CounterFamily {
    values: Mutex<BTreeMap<Vec<String>, u64>>,
}

impl CounterFamily {
    fn add(&self, labels: &[&str]) {
        let Ok(mut values) = self.values.lock() else {
            return;
        };
        // A family holds a handful of label sets: finding one costs less than the Strings of
        // a new key would, on every request.
        match values
            .iter_mut()
            .find(|(known, _)| known.iter().map(String::as_str).eq(labels.iter().copied()))
        {
            Some((_, count)) => *count += 1,
            None => {
                values.insert(labels.iter().map(|label| label.to_string()).collect(), 1);
            }
        }
    }

    fn get(&self, labels: &[&str]) -> u64 {
        let key: Vec<String> = labels.iter().map(|label| label.to_string()).collect();
        self.values
            .lock()
            .map_or(0, |values| values.get(&key).copied().unwrap_or(0))
    }

    fn render(&self, out: &mut String, name: &str, label_names: &[&str]) {
        let Ok(values) = self.values.lock() else {
            return;
        };
        for (labels, value) in values.iter() {
            let pairs: Vec<String> = label_names
                .iter()
                .zip(labels)
                .map(|(name, value)| format!("{name}=\"{}\"", escape_label(value)))
                .collect();
            let _ = writeln!(out, "{name}{{{}}} {value}", pairs.join(","));
        }
    }
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Everything `/metrics` reports.
#[derive(Default)]
pub struct Metrics {
    requests: CounterFamily,
    keys: CounterFamily,
    refusals: CounterFamily,
    tls_reloads: CounterFamily,
    request_seconds: Mutex<BTreeMap<String, std::sync::Arc<Histogram>>>,
    pub evaluation_seconds: Histogram,
    pub in_flight: AtomicI64,
    pub connections: AtomicI64,
    pub queued_keys: AtomicI64,
    pub workers: AtomicI64,
    pub instances_discarded: AtomicU64,
}

/// What became of one request, as the `outcome` label says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestOutcome {
    /// Answered, every key evaluated or given its own error.
    Answered,
    /// Answered with a systemError (overloaded, malformed, too large, unauthenticated).
    SystemError,
    /// Not a route, or a method the route does not take.
    NotFound,
}

impl RequestOutcome {
    fn label(self) -> &'static str {
        match self {
            RequestOutcome::Answered => "answered",
            RequestOutcome::SystemError => "system_error",
            RequestOutcome::NotFound => "not_found",
        }
    }
}

impl Metrics {
    pub fn request_done(&self, route: &str, outcome: RequestOutcome, elapsed: Duration) {
        self.requests.add(&[route, outcome.label()]);
        let histogram =
            self.request_seconds
                .lock()
                .ok()
                .map(|mut histograms| match histograms.get(route) {
                    Some(histogram) => std::sync::Arc::clone(histogram),
                    None => histograms.entry(route.to_string()).or_default().clone(),
                });
        if let Some(histogram) = histogram {
            histogram.observe(elapsed);
        }
    }

    /// `outcome`: `violations`, `clean`, or the reason of a per-key error.
    pub fn key_done(&self, outcome: &str) {
        self.keys.add(&[outcome]);
    }

    /// `reason`: `overloaded`, `body_too_large`, `read_timeout`, `malformed`, ...
    pub fn refused(&self, reason: &str) {
        self.refusals.add(&[reason]);
    }

    pub fn tls_reloaded(&self, outcome: &str) {
        self.tls_reloads.add(&[outcome]);
    }

    pub fn refusal_count(&self, reason: &str) -> u64 {
        self.refusals.get(&[reason])
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let header = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        header(
            &mut out,
            "meshlife_requests_total",
            "counter",
            "Requests by route and outcome.",
        );
        self.requests
            .render(&mut out, "meshlife_requests_total", &["route", "outcome"]);
        header(
            &mut out,
            "meshlife_keys_total",
            "counter",
            "Keys (module inputs) by outcome: violations, clean, or the per-key error's reason.",
        );
        self.keys
            .render(&mut out, "meshlife_keys_total", &["outcome"]);
        header(
            &mut out,
            "meshlife_refusals_total",
            "counter",
            "Requests or keys refused, by reason.",
        );
        self.refusals
            .render(&mut out, "meshlife_refusals_total", &["reason"]);
        header(
            &mut out,
            "meshlife_tls_reloads_total",
            "counter",
            "Certificate and client CA reloads, by outcome.",
        );
        self.tls_reloads
            .render(&mut out, "meshlife_tls_reloads_total", &["outcome"]);
        header(
            &mut out,
            "meshlife_evaluation_duration_seconds",
            "histogram",
            "Time of one module evaluation on a worker.",
        );
        self.evaluation_seconds
            .render(&mut out, "meshlife_evaluation_duration_seconds", "");
        header(
            &mut out,
            "meshlife_request_duration_seconds",
            "histogram",
            "Time from a request's headers to its response, by route.",
        );
        if let Ok(histograms) = self.request_seconds.lock() {
            for (route, histogram) in histograms.iter() {
                histogram.render(
                    &mut out,
                    "meshlife_request_duration_seconds",
                    &format!("route=\"{}\"", escape_label(route)),
                );
            }
        }
        let gauges = [
            (
                "meshlife_requests_in_flight",
                "Requests being answered.",
                &self.in_flight,
            ),
            (
                "meshlife_connections_open",
                "Open client connections.",
                &self.connections,
            ),
            (
                "meshlife_queued_keys",
                "Keys admitted and not yet answered (evaluating or waiting).",
                &self.queued_keys,
            ),
            (
                "meshlife_pool_workers",
                "Evaluation threads, each with a warm instance.",
                &self.workers,
            ),
        ];
        for (name, help, value) in gauges {
            header(&mut out, name, "gauge", help);
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
        header(
            &mut out,
            "meshlife_instances_discarded_total",
            "counter",
            "Module instances thrown away after an abort, trap or deadline.",
        );
        let _ = writeln!(
            out,
            "meshlife_instances_discarded_total {}",
            self.instances_discarded.load(Ordering::Relaxed)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_counters_labelled() {
        let metrics = Metrics::default();
        metrics
            .evaluation_seconds
            .observe(Duration::from_micros(20));
        metrics.evaluation_seconds.observe(Duration::from_secs(5));
        metrics.request_done(
            "validate",
            RequestOutcome::Answered,
            Duration::from_millis(1),
        );
        metrics.refused("overloaded");
        metrics.refused("overloaded");
        let text = metrics.render();
        assert!(text.contains("meshlife_evaluation_duration_seconds_bucket{le=\"0.000025\"} 1"));
        assert!(text.contains("meshlife_evaluation_duration_seconds_bucket{le=\"2.5\"} 1"));
        assert!(text.contains("meshlife_evaluation_duration_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("meshlife_evaluation_duration_seconds_count 2"));
        assert!(
            text.contains("meshlife_requests_total{route=\"validate\",outcome=\"answered\"} 1")
        );
        assert!(text.contains("meshlife_request_duration_seconds_count{route=\"validate\"} 1"));
        assert!(text.contains("meshlife_refusals_total{reason=\"overloaded\"} 2"));
        assert_eq!(metrics.refusal_count("overloaded"), 2);
    }
}
