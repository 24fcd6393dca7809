package dashboard

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	grafana "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// The matchers of the dashboard's variables, beyond job and instance
// (which [sel] always adds).
const (
	breakerM   = `meshless_circuit_breaker_name=~"$breaker"`
	bulkheadM  = `meshless_bulkhead_name=~"$breaker"` // bulkheads are keyed like breakers
	limiterM   = `meshless_rate_limiter_name=~"$breaker"`
	throttlerM = `meshless_throttler_name=~"$breaker"`
	methodM    = `rpc_method=~"$method"`
	grpcM      = `rpc_system_name="grpc"`  // a gRPC call's meshless.call.duration
	httpM      = `http_request_method!=""` // an HTTP call's
	serverM    = `server_address=~"$server"`
	// dead-letter queues are keyed like breakers
	deadLetterM = `meshless_deadletter_key=~"$breaker"`
)

// rateInterval is the window of every rate: Grafana's $__rate_interval, at
// least four scrape intervals, growing with the time range.
const rateInterval = "$__rate_interval"

// sel returns a selector of metric filtered by the job and instance
// variables and by matchers.
func sel(metric string, matchers ...string) string {
	return metric + "{" + strings.Join(append([]string{`job=~"$job"`, `instance=~"$instance"`}, matchers...), ", ") + "}"
}

// rate returns rate(selector[$__rate_interval]).
func rate(selector string) string {
	return "rate(" + selector + "[" + rateInterval + "])"
}

// increase returns increase(selector[window]).
func increase(selector, window string) string {
	return "increase(" + selector + "[" + window + "])"
}

// sumBy returns sum by (labels) (expr), or sum (expr) without labels.
func sumBy(labels, expr string) string {
	if labels == "" {
		return "sum(" + expr + ")"
	}
	return "sum by (" + labels + ") (" + expr + ")"
}

// quantile returns the q quantile of a histogram's buckets, by labels.
func quantile(q, labels, buckets string) string {
	return "histogram_quantile(" + q + ", sum by (le, " + labels + ") (" + rate(buckets) + "))"
}

// query is a range query of the panel's datasource.
func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(datasource()).
		Expr(expr).
		LegendFormat(legend).
		Range()
}

// The sizes of the grid (24 columns wide).
const (
	full    = 24
	half    = 12
	third   = 8
	quarter = 6
	height  = 8 // a time series
)

// series returns a time series panel of the queries, w columns wide, its
// y axis starting at 0, its refIds A, B, ….
func series(title, description, unit string, w uint32, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Span(w).
		Height(height).
		Unit(unit).
		Min(0).
		ColorScheme(grafana.NewFieldColorBuilder().Mode(grafana.FieldColorModeIdPaletteClassic)).
		DrawStyle(common.GraphDrawStyleLine).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		SpanNulls(common.BoolOrFloat64{Bool: cog.ToPtr(false)}).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
	for i, q := range queries {
		p.WithTarget(q.RefId(string(rune('A' + i))))
	}
	return p
}

// withLine draws a red threshold line at value on a time series: where an
// alert fires, or a default that opens a breaker.
func withLine(p *timeseries.PanelBuilder, value float64) *timeseries.PanelBuilder {
	return p.
		Thresholds(steps(grafana.Threshold{Color: "green"}, grafana.Threshold{Color: "red", Value: cog.ToPtr(value)})).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine))
}

// steps returns absolute thresholds; the first step's Value is nil (from
// minus infinity).
func steps(s ...grafana.Threshold) *grafana.ThresholdsConfigBuilder {
	return grafana.NewThresholdsConfigBuilder().Mode(grafana.ThresholdsModeAbsolute).Steps(s)
}

// single returns a stat panel of one instant query, coloured by steps on
// its background.
func single(title, description, expr string, w, h uint32, s ...grafana.Threshold) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Span(w).
		Height(h).
		Unit("none").
		Decimals(0).
		ColorScheme(grafana.NewFieldColorBuilder().Mode(grafana.FieldColorModeIdThresholds)).
		Thresholds(steps(s...)).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Fields("").Values(false)).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValue).
		JustifyMode(common.BigValueJustifyModeCenter).
		Orientation(common.VizOrientationAuto).
		WithTarget(prometheus.NewDataqueryBuilder().
			Datasource(datasource()).
			Expr(expr).
			Instant().
			RefId("A"))
}
