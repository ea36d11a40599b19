/**
 * The live run's figures as others read them: the Prometheus exposition and its endpoint (with the
 * job/node/rank labels a cluster's Prometheus sums over), and the terminal's live view. Everything
 * here reads the guard's {@link LiveState}; nothing here changes a run.
 *
 * @example
 * ```ts
 * import { formatPrometheus, renderLiveView } from "./metrics/index.ts";
 * ```
 *
 * @module
 */
export type { LiveState } from "../guard/live.ts";
export { clusterLabels, withRanksNode, type ClusterLabels } from "./labels.ts";
export { formatPrometheus, isLoopbackListen, parseListen, serveMetrics, type PrometheusContext } from "./prometheus.ts";
export { formatDuration, renderLiveView, renderStatusLine, StatusFooter, type Terminal, type ViewStyle } from "./view.ts";
