package dashboard

import (
	"strconv"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	grafana "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
)

// The threshold lines. The alerts' thresholds are those of
// docs/prometheus/meshless-rules.yml; change both together.
const (
	tripsAlert         = 3    // MeshlessCircuitBreakerTrips: opens per hour of one instance
	failureRateDefault = 0.8  // grpcmw's default failureRateThreshold (80%)
	retryAlert         = 1.1  // MeshlessRetryAmplification: attempts per call
	hedgeBudget        = 1.1  // the same 10% budget, for hedged copies
	saturationAlert    = 0.8  // MeshlessBulkheadSaturated
	notDrainingAlert   = 3600 // MeshlessDeadLetterNotDraining: the oldest waiting entry's age, seconds
	errorRatioLine     = 0.05 // a reference, not an alert: put your SLO's error budget here
)

func breakersRow() Row {
	state := func(states string) string {
		return sel("meshless_circuit_breaker_state", breakerM, `meshless_circuit_breaker_state=~"`+states+`"`)
	}
	opens := sel("meshless_circuit_breaker_transitions_total", breakerM, `meshless_circuit_breaker_state="open"`)
	green := grafana.Threshold{Color: "green"}
	return Row{Title: "Circuit breakers", Panels: []cog.Builder[grafana.Panel]{
		single("Open breakers",
			"Breaker instances (one per client process and key) that are OPEN or FORCED_OPEN now: they refuse every call with CIRCUIT_OPEN.",
			sumBy("", state("open|forced_open")), quarter, 4,
			green, grafana.Threshold{Color: "red", Value: cog.ToPtr(1.0)}),
		single("Half-open breakers",
			"Breaker instances letting their probes through now.",
			sumBy("", state("half_open")), quarter, 4,
			green, grafana.Threshold{Color: "orange", Value: cog.ToPtr(1.0)}),
		single("Closed breakers",
			"Breaker instances letting every call through.",
			sumBy("", state("closed")), quarter, 4,
			grafana.Threshold{Color: "blue"}),
		single("Trips in the last hour",
			"Transitions to OPEN in the last hour, all breakers together: from CLOSED (a trip) or from HALF_OPEN (failed probes).",
			sumBy("", increase(opens, "1h")), quarter, 4,
			green, grafana.Threshold{Color: "orange", Value: cog.ToPtr(1.0)}, grafana.Threshold{Color: "red", Value: cog.ToPtr(float64(tripsAlert))}),
		stateTimeline(state),
		withLine(series("Trips per hour (the worst instance of each breaker)",
			"Transitions to OPEN over the last hour, per breaker name, on the instance where it opened most: how often a breaker trips or fails its probes. The red line is the MeshlessCircuitBreakerTrips alert's threshold ("+strconv.Itoa(tripsAlert)+").",
			"none", half,
			query(`max by (meshless_circuit_breaker_name) (`+sumBy("job, instance, meshless_circuit_breaker_name", increase(opens, "1h"))+`)`,
				"{{meshless_circuit_breaker_name}}")), tripsAlert),
		series("Calls by outcome",
			"Calls per second through each breaker: success and failure (the breaker's classification: NOT_FOUND is a success), ignored (cancelled, or refused by the bulkhead inside the breaker), rejected (refused by the breaker: CIRCUIT_OPEN).",
			"reqps", half,
			query(sumBy("meshless_circuit_breaker_name, meshless_circuit_breaker_outcome", rate(sel("meshless_circuit_breaker_calls_total", breakerM))),
				"{{meshless_circuit_breaker_name}} {{meshless_circuit_breaker_outcome}}")),
		withLine(series("Failure and slow-call ratios",
			"The rates each breaker decides on, over its sliding window (the highest instance). Absent while the window holds fewer than minimumNumberOfCalls, and while half-open probes are out. The breaker opens when one reaches its threshold (failureRateThreshold, slowCallRateThreshold); the red line is grpcmw's default failureRateThreshold, 80%.",
			"percentunit", full,
			query(`max by (meshless_circuit_breaker_name) (`+sel("meshless_circuit_breaker_failure_ratio", breakerM)+`)`,
				"{{meshless_circuit_breaker_name}} failures"),
			query(`max by (meshless_circuit_breaker_name) (`+sel("meshless_circuit_breaker_slow_call_ratio", breakerM)+`)`,
				"{{meshless_circuit_breaker_name}} slow calls")).Max(1), failureRateDefault),
	}}
}

// stateTimeline shows each breaker name's worst state: the one-hot series
// weighted by how bad the state is, the highest weight winning. Each series
// is clamped to 1 first: it counts the breakers of the name in a process in
// that state (two chains on one observer share it), and the mappings know
// only the weights.
func stateTimeline(state func(string) string) *statetimeline.PanelBuilder {
	states := []struct {
		name, text, color string
	}{ // worst first
		{"forced_open", "FORCED_OPEN", "dark-red"},
		{"open", "OPEN", "red"},
		{"half_open", "HALF_OPEN", "orange"},
		{"disabled", "DISABLED", "blue"},
		{"metrics_only", "METRICS_ONLY", "purple"},
		{"closed", "CLOSED", "green"},
	}
	var terms []string
	mapping := grafana.ValueMap{Type: grafana.MappingTypeValueToText, Options: map[string]grafana.ValueMappingResult{}}
	for i, s := range states {
		weight := strconv.Itoa(len(states) - 1 - i)
		terms = append(terms, "(clamp_max("+state(s.name)+", 1) * "+weight+")")
		mapping.Options[weight] = grafana.ValueMappingResult{Text: cog.ToPtr(s.text), Color: cog.ToPtr(s.color), Index: cog.ToPtr(int32(i))}
	}
	expr := "max by (meshless_circuit_breaker_name) (\n  " + strings.Join(terms, "\n  or ") + "\n)"
	return statetimeline.NewPanelBuilder().
		Title("Breaker state (the worst instance of each breaker)").
		Description("One row per breaker name: the worst state any instance is in (FORCED_OPEN > OPEN > HALF_OPEN > DISABLED > METRICS_ONLY > CLOSED).").
		Datasource(datasource()).
		Span(full).
		Height(6).
		ShowValue(common.VisibilityModeNever).
		MergeValues(true).
		RowHeight(0.8).
		AlignValue(common.TimelineValueAlignmentLeft).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeSingle).
			Sort(common.SortOrderNone)).
		ColorScheme(grafana.NewFieldColorBuilder().Mode(grafana.FieldColorModeIdThresholds)).
		Mappings([]grafana.ValueMapping{{ValueMap: &mapping}}).
		Thresholds(steps(grafana.Threshold{Color: "green"})).
		WithTarget(query(expr, "{{meshless_circuit_breaker_name}}").RefId("A"))
}

func retriesRow() Row {
	return Row{Title: "Retries", Panels: []cog.Builder[grafana.Panel]{
		withLine(series("Retry amplification (attempts per call)",
			"Attempts per logical call, per method: 1 means no retries; 1.1 means retries add 10% to the load the backend sees (the red line: the MeshlessRetryAmplification alert's threshold). Only methods whose configuration retries (maxAttempts > 1) have retry metrics.",
			"none", half,
			query(sumBy("rpc_method", rate(sel("meshless_retry_attempts_total", methodM)))+
				"\n/\n"+sumBy("rpc_method", rate(sel("meshless_retry_calls_total", methodM))),
				"{{rpc_method}}")).Min(1), retryAlert),
		series("Retry outcomes",
			"Logical calls per second by how the retry policy ended them: at the first attempt or after retries, with success (OK or a business answer such as NOT_FOUND) or failure.",
			"reqps", half,
			query(sumBy("rpc_method, meshless_retry_outcome", rate(sel("meshless_retry_calls_total", methodM))),
				"{{rpc_method}} {{meshless_retry_outcome}}")),
	}}
}

func hedgingRow() Row {
	copies := sel("meshless_hedging_attempts_total", methodM)
	return Row{Title: "Hedging", Panels: []cog.Builder[grafana.Panel]{
		withLine(series("Hedging amplification (copies per call)",
			"Copies sent per logical call of each hedged method, the first included: 1 means no hedge was sent; with hedgingDelay at the method's p95, about 1.05. The red line is a 10% budget, the one the retry alert uses. Methods that do not hedge have no line, nor do hedged HTTP routes: their calls carry no rpc_method to divide by (see Hedged copies by winner).",
			"none", half,
			query(sumBy("rpc_method", rate(copies))+
				"\n/\n"+sumBy("rpc_method", rate(sel("meshless_call_duration_seconds_count", methodM))),
				"{{rpc_method}}")).Min(1), hedgeBudget),
		series("Hedged copies by winner",
			"Copies per second, by which copy's answer ended their call: first (copy 1 won: any hedge sent was wasted), hedge (a later copy won: hedging paid), none (every copy failed with a non-fatal code, was refused, or the caller gave up).",
			"reqps", half,
			query(sumBy("rpc_method, meshless_hedging_winner", rate(copies)),
				"{{rpc_method}} {{meshless_hedging_winner}}")),
	}}
}

func bulkheadsRow() Row {
	wait := sel("meshless_bulkhead_wait_duration_seconds_bucket", bulkheadM)
	return Row{Title: "Bulkheads", Panels: []cog.Builder[grafana.Panel]{
		withLine(series("Bulkhead saturation (active / limit)",
			"Attempts in flight over the bulkhead's limit (the highest instance). At 100% the next attempt is refused with BULKHEAD_FULL (or waits up to maxWaitDuration). The red line is the MeshlessBulkheadSaturated alert's threshold, 80%. Bulkheads are keyed like breakers, so the breaker variable selects them too.",
			"percentunit", third,
			query("max by (meshless_bulkhead_name) (\n  "+sel("meshless_bulkhead_call_active", bulkheadM)+
				"\n/\n  "+sel("meshless_bulkhead_limit", bulkheadM)+"\n)",
				"{{meshless_bulkhead_name}}")).Max(1), saturationAlert),
		series("Bulkhead admissions and rejections",
			"Attempts per second the bulkheads admitted or refused (BULKHEAD_FULL).",
			"reqps", third,
			query(sumBy("meshless_bulkhead_name, meshless_bulkhead_outcome", rate(sel("meshless_bulkhead_calls_total", bulkheadM))),
				"{{meshless_bulkhead_name}} {{meshless_bulkhead_outcome}}")),
		series("Bulkhead wait",
			"p99 and p50 of the time attempts waited for a permit, zero waits included, per bulkhead. Only bulkheads that may queue (maxWaitDuration > 0) record it; a p99 near maxWaitDuration means attempts are refused after waiting it out.",
			"s", third,
			query(quantile("0.99", "meshless_bulkhead_name", wait), "{{meshless_bulkhead_name}} p99"),
			query(quantile("0.5", "meshless_bulkhead_name", wait), "{{meshless_bulkhead_name}} p50")),
	}}
}

func callsRow() Row {
	count := func(m ...string) string {
		return sel("meshless_call_duration_seconds_count", append([]string{grpcM, methodM}, m...)...)
	}
	buckets := sel("meshless_call_duration_seconds_bucket", grpcM, methodM)
	all := sumBy("rpc_method", rate(count()))
	return Row{Title: "Logical gRPC calls (what the application waited for)", Panels: []cog.Builder[grafana.Panel]{
		series("Latency of logical calls",
			"p99 and p50 of meshless.call.duration per method: every attempt, backoff and rejection together, as the caller saw it. Rejected calls are fast, so an open breaker pulls these down.",
			"s", half,
			query(quantile("0.99", "rpc_method", buckets), "{{rpc_method}} p99"),
			query(quantile("0.5", "rpc_method", buckets), "{{rpc_method}} p50")),
		series("Calls that did not return OK, by error.type",
			"Logical calls per second by error.type: a gRPC code (UNAVAILABLE, DEADLINE_EXCEEDED, NOT_FOUND...) or meshless's own refusals (circuit_open, bulkhead_full, rate_limited, throttled). NOT_FOUND and other business answers are here too, although the breaker counts them as successes.",
			"reqps", half,
			query(sumBy("rpc_method, error_type", rate(count(`error_type!=""`))),
				"{{rpc_method}} {{error_type}}")),
		withLine(series("Error ratio per method",
			"The share of logical calls that did not return OK, per method (0 when none failed). Every code but OK counts, business answers such as NOT_FOUND included: read it beside the error.type panel. The red line is a reference at 5%, not an alert.",
			"percentunit", half,
			query("(\n  "+sumBy("rpc_method", rate(count(`error_type!=""`)))+"\n  or\n  "+all+" * 0\n)\n/\n"+all,
				"{{rpc_method}}")).Max(1), errorRatioLine),
		series("Timeouts",
			"Calls per second ended by meshless's own timeouts, per method and kind (attempt: timeout.perAttempt; overall: timeout.overall).",
			"reqps", half,
			query(sumBy("rpc_method, meshless_timeout_kind", rate(sel("meshless_timeout_calls_total", methodM, `meshless_timeout_outcome="timed_out"`))),
				"{{rpc_method}} {{meshless_timeout_kind}}")),
	}}
}

// httpRow is httpmw's calls: meshless.call.duration with OpenTelemetry's
// HTTP attributes, by host (server.address) and route (url.template, the
// route's pattern; none when no route matched). The retry, timeout and
// hedged-copies panels above show HTTP routes too, as host/route in
// rpc.method; the hedging amplification cannot (no rpc.method to divide by).
func httpRow() Row {
	count := func(m ...string) string {
		return sel("meshless_call_duration_seconds_count", append([]string{httpM}, m...)...)
	}
	buckets := sel("meshless_call_duration_seconds_bucket", httpM)
	const route = "server_address, url_template"
	const legend = "{{server_address}}{{url_template}}"
	return Row{Title: "Logical HTTP calls (httpmw)", Panels: []cog.Builder[grafana.Panel]{
		series("HTTP latency per route",
			"p99 and p50 of meshless.call.duration per host and route (url.template: the route's net/http pattern, never a path; none when no route of the host matched; _OTHER: the hosts the configuration does not name), every attempt and backoff together, up to the response's header.",
			"s", third,
			query(quantile("0.99", route, buckets), legend+" p99"),
			query(quantile("0.5", route, buckets), legend+" p50")),
		series("HTTP calls by status",
			"Calls per second per host, route and the status of the response the caller got (http.response.status_code): a 4xx or 5xx is a response, not an error, in httpmw. Calls that got no response (a transport error, a timeout, a rejection) have no status: see error.type.",
			"reqps", third,
			query(sumBy(route+", http_response_status_code", rate(count())), legend+" {{http_response_status_code}}")),
		series("HTTP calls by error.type",
			"Calls per second that did not end 2xx or 3xx, by error.type: the status for a 4xx or 5xx (\"503\"), a transport error (timeout, connection_refused, dns, tls…) or meshless's own refusals (circuit_open, bulkhead_full, rate_limited, throttled).",
			"reqps", third,
			query(sumBy(route+", error_type", rate(count(`error_type!=""`))), legend+" {{error_type}}")),
	}}
}

func rateLimitersRow() Row {
	return Row{Title: "Rate limiters", Panels: []cog.Builder[grafana.Panel]{
		series("Rate limiter calls, permitted and rejected",
			"Calls per second that each rate limiter permitted or rejected (rateLimiter in the configuration; a rejection is RESOURCE_EXHAUSTED with RATE_LIMITED, never retried). Rate limiters are keyed like breakers. No series means no rateLimiter is configured.",
			"reqps", full,
			query(sumBy("meshless_rate_limiter_name, meshless_rate_limiter_outcome", rate(sel("meshless_rate_limiter_calls_total", limiterM))),
				"{{meshless_rate_limiter_name}} {{meshless_rate_limiter_outcome}}")),
	}}
}

func throttlerRow() Row {
	return Row{Title: "Adaptive throttling and observe mode", Panels: []cog.Builder[grafana.Panel]{
		series("Adaptive throttler, admitted and rejected",
			"Requests per second that each adaptive throttler admitted or rejected locally (meshless.throttler.calls; a rejection is RESOURCE_EXHAUSTED with THROTTLED, never retried). Throttlers are keyed like breakers. See docs/overload.md.",
			"reqps", half,
			query(sumBy("meshless_throttler_name, meshless_throttler_outcome", rate(sel("meshless_throttler_calls_total", throttlerM))),
				"{{meshless_throttler_name}} {{meshless_throttler_outcome}}")),
		series("Observe mode: what policies would have done",
			"meshless.observe.decisions: in observe mode (mode: observe) a policy decides as usual and does not act; this counts, per second, the calls it would have rejected, timed out, retried or hedged, by policy and action. Compare with the real rejections of the rows above before switching to mode: enforce. No series: nothing is in observe mode.",
			"reqps", half,
			query(sumBy("meshless_policy_kind, meshless_observe_action", rate(sel("meshless_observe_decisions_total"))),
				"{{meshless_policy_kind}} would {{meshless_observe_action}}")),
	}}
}

func outlierRow() Row {
	return Row{Title: "Outlier ejection (endpoints taken out of load balancing)", Panels: []cog.Builder[grafana.Panel]{
		series("Ejections per second, by endpoint and reason",
			"meshless.outlier.ejections: endpoints the meshless_outlier balancer took out of load balancing, per second, by server.address and reason (consecutive_failures, failure_percentage, success_rate, slow_calls). See docs/outlier.md.",
			"ops", half,
			query(sumBy("server_address, meshless_outlier_reason", rate(sel("meshless_outlier_ejections_total", serverM))),
				"{{server_address}} {{meshless_outlier_reason}}")),
		series("Endpoints ejected now",
			"meshless.outlier.ejected: 1 while an endpoint is ejected, per server.address (summed over the client processes that eject it). At most maxEjectionPercent of a channel's endpoints are out at once.",
			"short", half,
			query(sumBy("server_address", sel("meshless_outlier_ejected", serverM)), "{{server_address}}")).
			Decimals(0).
			LineInterpolation(common.LineInterpolationStepAfter),
	}}
}

func clusterRow() Row {
	return Row{Title: "Cluster mode (breakers shared through Redis)", Panels: []cog.Builder[grafana.Panel]{
		single("Instances connected to Redis",
			"Instances whose cluster mode Redis answers now (meshless.cluster.connected). An instance Redis does not answer decides on its own windows: no error reaches its callers.",
			sumBy("", sel("meshless_cluster_connected")), quarter, height,
			grafana.Threshold{Color: "red"}, grafana.Threshold{Color: "green", Value: cog.ToPtr(1.0)}),
		series("Cluster syncs by outcome",
			"Syncs with Redis per second, ok or error (meshless.cluster.syncs). Each instance syncs once per syncInterval; errors mean Redis was slow or away and the instance decided locally.",
			"ops", 9,
			query(sumBy("meshless_cluster_outcome", rate(sel("meshless_cluster_syncs_total"))), "{{meshless_cluster_outcome}}")),
		series("Remote opens per hour",
			"Breakers opened because another instance opened the same key (meshless.cluster.remote_opens): the traffic cluster mode kept away from a failing dependency.",
			"none", 9,
			query(sumBy("meshless_circuit_breaker_name", increase(sel("meshless_cluster_remote_opens_total", breakerM), "1h")),
				"{{meshless_circuit_breaker_name}}")),
	}}
}

func deadLetterRow() Row {
	return Row{Title: "Dead-letter queue (calls kept while a breaker is open, replayed after)", Panels: []cog.Builder[grafana.Panel]{
		series("Dead-letter entries, waiting and parked",
			"meshless.deadletter.depth per key (a breaker key) and state: waiting for a replay, or parked after maxReplays failed replays, for an operator (meshless-deadletter). Waiting rises while the breaker is open and falls as replays drain it once it closes; parked entries stay until requeued or purged, and count towards maxEntries. The highest instance: with the Redis store every instance reports the same shared depth. See docs/deadletter.md.",
			"short", half,
			query("max by (meshless_deadletter_key, meshless_deadletter_state) ("+sel("meshless_deadletter_depth", deadLetterM)+")",
				"{{meshless_deadletter_key}} {{meshless_deadletter_state}}")).
			Decimals(0),
		withLine(series("Oldest waiting entry",
			"meshless.deadletter.oldest.age per key: how long the oldest entry waiting for a replay has waited (0 when none waits). It grows while the breaker is open and drops when the replays drain the queue. The red line is the MeshlessDeadLetterNotDraining alert's threshold (an hour); past maxAge (24h by default) entries expire unreplayed.",
			"s", half,
			query("max by (meshless_deadletter_key) ("+sel("meshless_deadletter_oldest_age_seconds", deadLetterM)+")",
				"{{meshless_deadletter_key}}")), notDrainingAlert),
		series("Dead-letter entries by event",
			"meshless.deadletter.entries per second, per key and event: deferred (kept; the caller got DEFERRED), replayed (a replay succeeded and the entry is gone), failed (a replay failed; it stays), parked, expired (older than maxAge, dropped unreplayed), refused (not kept: the key was full or its store failed, and the caller got its original error), dropped (unreadable), requeued and purged (an operator). refused, expired and dropped are work lost: the MeshlessDeadLetterLosing alert.",
			"ops", full,
			query(sumBy("meshless_deadletter_key, meshless_deadletter_event", rate(sel("meshless_deadletter_entries_total", deadLetterM))),
				"{{meshless_deadletter_key}} {{meshless_deadletter_event}}")),
	}}
}
