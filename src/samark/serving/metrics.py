"""Prometheus metrics of one server (its own registry, so two apps in a process do not
share counters): requests by route and status, latency histograms, detections by
outcome, generated sentences, requests in flight."""

from __future__ import annotations

import time

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300)


class ServeMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "samark_requests",
            "HTTP requests by route and status code.",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "samark_request_seconds",
            "Time to the end of the response, by route.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "samark_requests_in_flight", "Requests being served.", registry=self.registry
        )
        self.detections = Counter(
            "samark_detections",
            "Texts tested by /v1/detect, by outcome (watermarked, not_watermarked, error).",
            ["outcome"],
            registry=self.registry,
        )
        self.sentences = Counter(
            "samark_generated_sentences",
            "Watermarked sentences generated.",
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts every request by its route *template* (never the raw path: bounded labels). A
    request refused before routing (over the body limit) counts under its path where that
    is one of the app's own ``paths``, else as "unmatched"."""

    def __init__(
        self, app: ASGIApp, metrics: ServeMetrics, paths: frozenset[str] = frozenset()
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.in_flight.dec()
            route = scope.get("route")  # starlette's, once routed
            path = scope.get("path")
            label = getattr(route, "path", None) or (path if path in self.paths else "unmatched")
            self.metrics.requests.labels(label, str(status)).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - start)
