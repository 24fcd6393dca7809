// This file serves the meshless client's metrics for Prometheus: otelmw
// records them with the OpenTelemetry SDK, whose Prometheus exporter names
// them as docs/operations.md lists.

package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/meshless/meshless/otelmw"
)

// metrics is an observer and the handler of /metrics that serves its
// metrics in Prometheus's format, recorded through the OpenTelemetry SDK and
// its Prometheus exporter with the default (suffixed) names.
type metrics struct {
	Observer *otelmw.Observer
	Cluster  *otelmw.ClusterListener // the cluster scenario's syncs and remote opens
	// DeadLetter records the events scenario's dead-letter queue.
	DeadLetter *otelmw.DeadLetterListener
	Handler    http.Handler
	provider   *sdkmetric.MeterProvider
}

func newMetrics() (*metrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exp),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "meshless-chaos"))),
	)
	obs, err := otelmw.New(mp)
	if err != nil {
		return nil, errors.Join(err, mp.Shutdown(context.Background()))
	}
	cl, err := otelmw.NewClusterListener(mp)
	if err != nil {
		return nil, errors.Join(err, obs.Close(), mp.Shutdown(context.Background()))
	}
	dl, err := otelmw.NewDeadLetterListener(mp)
	if err != nil {
		return nil, errors.Join(err, obs.Close(), cl.Close(), mp.Shutdown(context.Background()))
	}
	return &metrics{Observer: obs, Cluster: cl, DeadLetter: dl, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), provider: mp}, nil
}

// Close stops the observer, the listeners and their meter provider.
func (m *metrics) Close(ctx context.Context) error {
	return errors.Join(m.Observer.Close(), m.Cluster.Close(), m.DeadLetter.Close(), m.provider.Shutdown(ctx))
}

// metricsServer is an HTTP server of /metrics and the observer whose
// metrics it serves.
type metricsServer struct {
	*metrics
	Addr   string // where it listens, host:port
	srv    *http.Server
	served chan struct{}
}

// serveMetrics listens on addr and serves /metrics (see [metrics]).
func serveMetrics(addr string) (*metricsServer, error) {
	m, err := newMetrics()
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errors.Join(err, m.Close(context.Background()))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler)
	s := &metricsServer{
		metrics: m,
		Addr:    lis.Addr().String(),
		srv:     &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		served:  make(chan struct{}),
	}
	go func() {
		defer close(s.served)
		s.srv.Serve(lis) //nolint:errcheck // ErrServerClosed once Close is called
	}()
	return s, nil
}

// Close stops the server and the observer.
func (s *metricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := errors.Join(s.srv.Shutdown(ctx), s.metrics.Close(ctx))
	<-s.served
	return err
}
