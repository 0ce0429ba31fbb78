import Hummingbird
import Metrics
import Prometheus
import Synchronization
import XferProtocol

/// What `GET /metrics` shows (Prometheus text format, admin token): requests by route and
/// status with latency histograms (hummingbird's `MetricsMiddleware` over swift-metrics),
/// and xfer's own counters. One registry per process: swift-metrics is bootstrapped once, the
/// first time a server is made, so every server of a process (tests make many) counts into it.
public final class ServerMetrics: Sendable {
    /// The process's metrics.
    public static let process = ServerMetrics()

    public let registry: PrometheusCollectorRegistry

    let chunksReceived: Prometheus.Counter
    let chunksStored: Prometheus.Counter
    let chunkBytesStored: Prometheus.Counter
    let bytesIn: Prometheus.Counter
    let bytesOut: Prometheus.Counter
    let commits: Prometheus.Counter
    let conflicts: Prometheus.Counter
    let feedWaiters: Prometheus.Gauge
    let gcRuns: Prometheus.Counter
    let gcChunksRemoved: Prometheus.Counter
    let gcBytesFreed: Prometheus.Counter
    let verifyRuns: Prometheus.Counter
    let verifyDamaged: Prometheus.Gauge
    let accounts: Prometheus.Gauge
    let bytesUsed: Prometheus.Gauge

    /// The descriptor of the metric named `name` in full, as it is scraped.
    private static func metric(_ name: String, help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    private init() {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        chunksReceived = registry.makeCounter(
            descriptor: Self.metric(
                "xfer_chunks_received_total", help: "Chunks received in uploads (stored or already held)."))
        chunksStored = registry.makeCounter(
            descriptor: Self.metric(
                "xfer_chunks_stored_total", help: "Chunks newly recorded for an account (the rest were deduplicated)."))
        chunkBytesStored = registry.makeCounter(
            descriptor: Self.metric(
                "xfer_chunk_bytes_stored_total", help: "Plain bytes of the chunks newly recorded for an account."))
        bytesIn = registry.makeCounter(
            descriptor: Self.metric("xfer_upload_bytes_total", help: "Bytes of chunk frames received."))
        bytesOut = registry.makeCounter(
            descriptor: Self.metric("xfer_download_bytes_total", help: "Bytes of chunk frames and web downloads sent."))
        commits = registry.makeCounter(descriptor: Self.metric("xfer_commits_total", help: "Versions committed."))
        conflicts = registry.makeCounter(
            descriptor: Self.metric("xfer_conflicts_total", help: "Commits kept as conflict versions."))
        feedWaiters = registry.makeGauge(
            descriptor: Self.metric(
                "xfer_feed_waiters", help: "Change-feed long polls and web event streams waiting now."))
        gcRuns = registry.makeCounter(descriptor: Self.metric("xfer_gc_runs_total", help: "Garbage collections run."))
        gcChunksRemoved = registry.makeCounter(
            descriptor: Self.metric("xfer_gc_chunks_removed_total", help: "Chunks garbage collection removed."))
        gcBytesFreed = registry.makeCounter(
            descriptor: Self.metric("xfer_gc_bytes_freed_total", help: "Bytes garbage collection freed."))
        verifyRuns = registry.makeCounter(descriptor: Self.metric("xfer_verify_runs_total", help: "Verifications run."))
        verifyDamaged = registry.makeGauge(
            descriptor: Self.metric(
                "xfer_verify_damaged", help: "Damaged chunks and manifests the last verification found."))
        accounts = registry.makeGauge(descriptor: Self.metric("xfer_accounts", help: "Accounts, when last scraped."))
        bytesUsed = registry.makeGauge(
            descriptor: Self.metric(
                "xfer_used_bytes",
                help: "Plain bytes every account holds (each chunk once per account), when last scraped."))
    }

    /// Counts a committed version, and a conflict when the commit made one: it was kept as a
    /// conflict version, or it won over a version committed after its base (which became one).
    func counted(_ info: DocumentInfo) {
        commits.increment()
        if info.state == .conflict || (info.conflicts ?? []).contains(where: { $0 > (info.baseVersion ?? 0) }) {
            conflicts.increment()
        }
    }

    /// The text a scrape answers, store gauges read first.
    func scrape(_ metadata: any MetadataStore) async throws -> [UInt8] {
        let usage = try await metadata.accounts()
        accounts.set(Int64(usage.count))
        bytesUsed.set(usage.reduce(Int64(0)) { $0 + $1.used })
        return registry.emitToBuffer()
    }
}
