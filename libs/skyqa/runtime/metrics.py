"""Prometheus metrics per service, in base units with ``_total`` counters."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from skyqa.bus import BusMetrics

_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class ServiceMetrics(BusMetrics):
    def __init__(self, service: str) -> None:
        self.service = service
        self.registry = CollectorRegistry()
        self.messages_handled = Counter(
            "skyqa_messages_handled_total",
            "Messages whose handler finished, by outcome (ack, nak, dlq).",
            ["service", "subject", "outcome"],
            registry=self.registry,
        )
        self.messages_failed = Counter(
            "skyqa_messages_failed_total",
            "Messages whose handler raised (retried or dead-lettered).",
            ["service", "subject"],
            registry=self.registry,
        )
        self.handler_duration = Histogram(
            "skyqa_handler_duration_seconds",
            "Wall time of one handler invocation.",
            ["service", "subject"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.in_flight_gauge = Gauge(
            "skyqa_messages_in_flight",
            "Messages being handled now.",
            ["service"],
            registry=self.registry,
        )
        self.messages_published = Counter(
            "skyqa_messages_published_total",
            "Messages published.",
            ["service", "subject"],
            registry=self.registry,
        )
        self.frames = Counter(
            "skyqa_frames_rendered_total",
            "Frames rendered or captured.",
            ["service"],
            registry=self.registry,
        )
        self.points = Counter(
            "skyqa_points_fused_total",
            "Points fed into fusion.",
            ["service"],
            registry=self.registry,
        )

    def handled(self, subject: str, outcome: str, seconds: float) -> None:
        self.messages_handled.labels(self.service, subject, outcome).inc()
        if outcome != "ack":
            self.messages_failed.labels(self.service, subject).inc()
        self.handler_duration.labels(self.service, subject).observe(seconds)

    def published(self, subject: str) -> None:
        # Progress subjects carry the run id; fold them so label cardinality stays bounded.
        if subject.startswith("skyqa.v1.progress."):
            subject = "skyqa.v1.progress.*"
        self.messages_published.labels(self.service, subject).inc()

    def in_flight(self, delta: int) -> None:
        self.in_flight_gauge.labels(self.service).inc(delta)
