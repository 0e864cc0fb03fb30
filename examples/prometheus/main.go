// Command prometheus exports a server's metrics to Prometheus through
// OpenTelemetry (go.opentelemetry.io/otel/exporters/prometheus): the
// meter provider is set once, globally, and the server, which is given
// none, uses it.
//
//	go run ./examples/prometheus                    # memory transport: prints what a scrape returns and exits
//	go run ./examples/prometheus -listen :9464      # and keeps serving /metrics until interrupted
//	go run ./examples/prometheus -amqp amqp://guest:guest@localhost:5672/
//
// Five orders are handled: accepted, accepted after two retries, rejected
// (dead-lettered), not JSON (parked), and failing until their attempts
// are exhausted. The scrape shows them in one vocabulary:
// acemq_messages_handled_total{outcome} counts every delivery by what
// the server did with it, and acemq_messages_dead_lettered_total the
// give-ups among them with the same words; acemq_handler_duration_seconds
// and acemq_message_age_seconds are histograms by the same queue and
// outcome. Traces go the same way: otel.SetTracerProvider once, and the
// server and the publisher use it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"github.com/acemq/acemq/transport/memory"
)

const queue = "acemq.example.metrics"

// Order is the message body.
type Order struct {
	ID int `json:"id"`
	// Fail makes the handler fail this many times before it succeeds; -1
	// rejects the order outright.
	Fail int `json:"fail"`
}

// policy retries in the process, quickly: three attempts in all.
var policy = retry.Fixed(3, 20*time.Millisecond)

// deliveries is how many deliveries the five orders take: 1 + 3 + 1 + 1 + 3.
const deliveries = 9

func main() {
	url := flag.String("amqp", "", "RabbitMQ URL; empty runs on the in-process memory transport")
	listen := flag.String("listen", "", "address to keep serving /metrics on after the orders are handled (e.g. :9464); empty exits")
	flag.Parse()
	if err := run(os.Stdout, *url, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, url, listen string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The exporter is a reader of a meter provider that registers with a
	// Prometheus registry. WithoutScopeInfo keeps the lines short; leave
	// it out to have otel_scope_name on every series.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp) // the server below is given no MeterProvider: it takes this one
	defer otel.SetMeterProvider(prev)

	t, closeTransport, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer closeTransport()
	if err := t.Declare(ctx, acemq.Topology(queue, policy, nil)); err != nil {
		return err
	}
	for _, q := range []string{queue, acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue)} {
		if err := drain(ctx, t, q); err != nil { // leftovers of an earlier run
			return err
		}
	}

	mux := acemq.NewMux()
	mux.Handle(queue, acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, o Order) ack.Ack {
		switch {
		case o.Fail < 0:
			return ack.DeadLetter(fmt.Errorf("order %d: no such customer", o.ID))
		case m.Attempt() <= o.Fail:
			return ack.Retry(errors.New("the warehouse is not answering"))
		}
		return ack.Accept()
	}))
	srv := &acemq.Server{Transport: t, Handler: mux, Retry: policy, Logger: zap.NewNop()}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-runErr:
		return err
	}

	pub := &acemq.Publisher{Transport: t, Mandatory: true}
	for _, o := range []Order{{ID: 1}, {ID: 2, Fail: 2}, {ID: 3, Fail: -1}, {ID: 4, Fail: 99}} {
		if _, err := pub.PublishValue(ctx, acemq.Outgoing{RoutingKey: queue}, o); err != nil {
			return err
		}
	}
	if _, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: queue, Body: []byte("<order id=5/>")}); err != nil {
		return err
	}
	if err := settled(ctx, reg, deliveries); err != nil {
		return err
	}
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	if err := <-runErr; err != nil {
		return err
	}

	// Scrape, as Prometheus would.
	ln, err := net.Listen("tcp", orLoopback(listen))
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	lines, err := scrape(ctx, "http://"+ln.Addr().String()+"/metrics")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "GET http://%s/metrics\n", ln.Addr())
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	if listen == "" {
		return nil
	}
	fmt.Fprintf(out, "serving /metrics on %s until interrupted\n", ln.Addr())
	stop, cancelStop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancelStop()
	<-stop.Done()
	return nil
}

// settled waits until the server has settled n deliveries, by its own
// count, acemq.messages.handled.
func settled(ctx context.Context, reg *prometheus.Registry, n float64) error {
	for {
		families, err := reg.Gather()
		if err != nil {
			return err
		}
		var total float64
		for _, f := range families {
			if f.GetName() == "acemq_messages_handled_total" {
				for _, m := range f.GetMetric() {
					total += m.GetCounter().GetValue()
				}
			}
		}
		if total >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v of %v deliveries settled: %w", total, n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// scrape returns the acemq counters and the histograms' counts of a
// scrape, sorted.
func scrape(ctx context.Context, url string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		for _, p := range []string{"acemq_messages_handled_total{", "acemq_messages_dead_lettered_total{", "acemq_retry_scheduled_total{",
			"acemq_handler_duration_seconds_count{", "acemq_message_age_seconds_count{"} {
			if strings.HasPrefix(l, p) {
				lines = append(lines, l)
			}
		}
	}
	slices.Sort(lines)
	return lines, nil
}

func orLoopback(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

func connect(ctx context.Context, url string) (transport.Transport, func(), error) {
	if url == "" {
		b := memory.New(memory.WithRealClock())
		c := b.Connect()
		return c, func() { c.Close(); b.Close() }, nil
	}
	t, err := rabbitmq.Dial(ctx, url, rabbitmq.WithConnectionName("acemq-example-prometheus"))
	if err != nil {
		return nil, nil, err
	}
	return t, func() { t.Close() }, nil
}

// drain removes what a queue holds.
func drain(ctx context.Context, t transport.Transport, q string) error {
	for {
		d, ok, err := t.Get(ctx, q)
		if err != nil || !ok {
			return err
		}
		if err := d.Ack(); err != nil {
			return err
		}
	}
}
