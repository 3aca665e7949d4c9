//! The span processor: a finished span goes into a bounded queue without waiting — a full queue
//! drops it and counts the drop — and one task exports what is queued in batches. So a slow or
//! unreachable collector costs at most the queue's memory, never a run's time.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;

/// Finished spans waiting for export, at most; past this a span is dropped and counted.
pub const SPANS_QUEUED_MAX: usize = 4096;
/// Spans per export request, at most.
pub const EXPORT_BATCH_SPANS_MAX: usize = 512;
/// A partial batch waits this long at most before it is exported.
pub const EXPORT_INTERVAL_MS: u64 = 1000;

enum Command {
    Span(Box<SpanData>),
    Resource(Resource),
    Flush(oneshot::Sender<()>),
}

pub struct QueueProcessor {
    queue: mpsc::Sender<Command>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for QueueProcessor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("QueueProcessor")
    }
}

/// Asks the exporting task to export what is queued now.
pub struct Flusher {
    queue: mpsc::Sender<Command>,
}

impl Flusher {
    pub async fn flush(&self, wait_max: Duration) {
        let (done, exported) = oneshot::channel();
        let asked = tokio::time::timeout(wait_max, self.queue.send(Command::Flush(done)));
        if matches!(asked.await, Ok(Ok(()))) {
            let _ = tokio::time::timeout(wait_max, exported).await;
        }
    }
}

impl QueueProcessor {
    /// The processor, and the handle that flushes it; the exporting task runs until the
    /// processor and the handle are gone.
    pub fn spawn<E: SpanExporter + 'static>(
        exporter: E,
        metrics: Arc<Metrics>,
    ) -> (QueueProcessor, Flusher) {
        let (queue, commands) = mpsc::channel(SPANS_QUEUED_MAX);
        tokio::spawn(export(exporter, commands, metrics.clone()));
        (QueueProcessor { queue: queue.clone(), metrics }, Flusher { queue })
    }
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if self.queue.try_send(Command::Span(Box::new(span))).is_err() {
            self.metrics.trace_spans_dropped.inc();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        // Synchronous, and called from async code: the server flushes through [`Flusher`].
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        let _ = self.queue.try_send(Command::Resource(resource.clone()));
    }
}

async fn export<E: SpanExporter>(
    mut exporter: E,
    mut commands: mpsc::Receiver<Command>,
    metrics: Arc<Metrics>,
) {
    let mut batch: Vec<SpanData> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(EXPORT_INTERVAL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                None => {
                    send(&exporter, &mut batch, &metrics).await;
                    return;
                }
                Some(Command::Span(span)) => {
                    batch.push(*span);
                    if batch.len() >= EXPORT_BATCH_SPANS_MAX {
                        send(&exporter, &mut batch, &metrics).await;
                    }
                }
                Some(Command::Resource(resource)) => exporter.set_resource(&resource),
                Some(Command::Flush(done)) => {
                    send(&exporter, &mut batch, &metrics).await;
                    let _ = done.send(());
                }
            },
            _ = tick.tick() => send(&exporter, &mut batch, &metrics).await,
        }
    }
}

async fn send<E: SpanExporter>(exporter: &E, batch: &mut Vec<SpanData>, metrics: &Metrics) {
    if batch.is_empty() {
        return;
    }
    let spans = std::mem::take(batch);
    let count = spans.len() as u64;
    match exporter.export(spans).await {
        Ok(()) => {
            metrics.trace_spans_exported.inc_by(count);
        }
        Err(error) => {
            metrics.trace_export_failures.inc();
            tracing::warn!(%error, spans = count, "spans could not be exported");
        }
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{Span as _, Tracer as _, TracerProvider as _};
    use opentelemetry_sdk::trace::SdkTracerProvider;

    use super::*;

    /// A collector that never answers.
    #[derive(Debug)]
    struct Stuck;

    impl SpanExporter for Stuck {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            std::future::pending().await
        }
    }

    /// Ending a span never waits, even for a collector that never answers: past the queue,
    /// spans are dropped and counted.
    #[tokio::test]
    async fn a_stuck_collector_costs_the_queue_and_drops_the_rest() {
        let metrics = Arc::new(Metrics::new());
        let (processor, _flusher) = QueueProcessor::spawn(Stuck, metrics.clone());
        let provider = SdkTracerProvider::builder().with_span_processor(processor).build();
        let tracer = provider.tracer("test");
        let beyond = 1_000;
        for _ in 0..SPANS_QUEUED_MAX + EXPORT_BATCH_SPANS_MAX + beyond {
            tracer.start("span").end();
            // Let the exporting task take what it takes (it stops at its first export).
            tokio::task::yield_now().await;
        }
        // The task holds at most one batch, the queue the rest; everything else was dropped.
        assert!(
            metrics.trace_spans_dropped.get() >= beyond as u64 - 1,
            "{}",
            metrics.trace_spans_dropped.get()
        );
        assert_eq!(metrics.trace_spans_exported.get(), 0);
    }
}
