package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The latency scenario: publish-to-handler latency at a fixed offered
// rate. For each system, one pipeline (its publisher and its consumer on
// one queue, in this process) is first calibrated closed-loop: cfg.publishers
// goroutines publish as fast as the window lets them for
// cfg.latencyCalibrate while the consumer handles, and the pipeline's
// maximum is the messages handled over the time to the last one. Then it
// is offered cfg.latencyLoads of that maximum, cfg.latencySeconds each, on
// an open-loop schedule: message i is due at t0 + i/rate, the pacer hands
// it to a publisher at that time whatever the consumer or the confirms are
// doing, and its latency is the handler's receive time minus its due time
// (one process, one monotonic clock). A publisher held up by a full window
// delays its message, and the delay counts: coordinated omission cannot
// hide it. The body carries the phase and the index of the message; the
// due time is computed from them.

// loadLatency is one load's figures in one run.
type loadLatency struct {
	load    float64       // of the maximum
	maxRate float64       // the calibrated (or given) maximum, msgs/s
	rate    float64       // offered, msgs/s
	n       int           // messages offered and handled
	p50     time.Duration // nearest-rank percentiles of handler receive − due
	p99     time.Duration
	p999    time.Duration
	max     time.Duration
	dups    int // deliveries of a message already handled
}

// latencyPipe is one system's publisher and consumer on e.queue. The
// consumer calls sink with each body, in its handler.
type latencyPipe struct {
	publish func(ctx context.Context, body []byte) error
	close   func(ctx context.Context) error
}

type openPipe func(ctx context.Context, e *env, sink func(body []byte)) (*latencyPipe, error)

func latencyAcemq(ctx context.Context, e *env, m *meter) error {
	return runLatency(ctx, e, m, openAcemqPipe)
}

func latencyRaw(ctx context.Context, e *env, m *meter) error {
	return runLatency(ctx, e, m, openRawPipe)
}

func latencyWatermill(ctx context.Context, e *env, m *meter) error {
	return runLatency(ctx, e, m, openWatermillPipe)
}

// Message bodies: {"seq":"P-IIIIIIIIII","pad":"…"}, P the phase (0 the
// warm-up, 1 the calibration, 2… the loads), I the index in it; a JSON
// object of cfg.bodySize bytes, as the other scenarios send.
const (
	seqHead   = `{"seq":"`
	seqDigits = 12 // "P-IIIIIIIIII"
	seqMid    = `","pad":"`
	seqTail   = `"}`
)

// latencyBody is the body of message index of phase.
func latencyBody(size, phase, index int) []byte {
	b := make([]byte, 0, max(size, len(seqHead)+seqDigits+len(seqMid)+len(seqTail)))
	b = append(b, seqHead...)
	b = append(b, fmt.Sprintf("%d-%010d", phase%10, index)...)
	b = append(b, seqMid...)
	for i := 0; len(b) < size-len(seqTail); i++ {
		b = append(b, 'a'+byte(i%26))
	}
	return append(b, seqTail...)
}

// parseLatencyBody reads the phase and index latencyBody wrote.
func parseLatencyBody(b []byte) (phase, index int, ok bool) {
	if len(b) < len(seqHead)+seqDigits || string(b[:len(seqHead)]) != seqHead {
		return 0, 0, false
	}
	s := b[len(seqHead) : len(seqHead)+seqDigits]
	if s[0] < '0' || s[0] > '9' || s[1] != '-' {
		return 0, 0, false
	}
	for _, c := range s[2:] {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		index = index*10 + int(c-'0')
	}
	return int(s[0] - '0'), index, true
}

// dueOffset is when message i is due after t0 at rate msgs/s.
func dueOffset(i int, rate float64) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / rate)
}

// pace hands 0..n-1 to out, each at t0 + dueOffset(i, rate) or as soon
// after as it wakes, never waiting for anything downstream: out has room
// for all n. It returns early when ctx ends.
func pace(ctx context.Context, t0 time.Time, rate float64, n int, out chan<- int) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := range n {
		if d := time.Until(t0.Add(dueOffset(i, rate))); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		out <- i
	}
}

// phaseRec records one phase's arrivals: each message's latency, by index.
type phaseRec struct {
	id   int
	t0   time.Time
	rate float64        // 0: closed loop, latency not recorded
	lat  []atomic.Int64 // receive − due + 1 ns; 0 for not yet handled
	got  atomic.Int64   // distinct messages handled
	last atomic.Int64   // the latest receive, ns after t0
	dups atomic.Int64
	bad  atomic.Int64 // bodies of another phase, or unreadable
}

func newPhase(id int, n int, rate float64) *phaseRec {
	return &phaseRec{id: id, rate: rate, lat: make([]atomic.Int64, n)}
}

func (p *phaseRec) arrive(phase, index int, at time.Time) {
	if phase != p.id || index < 0 || index >= len(p.lat) {
		p.bad.Add(1)
		return
	}
	d := at.Sub(p.t0)
	if p.rate > 0 {
		d -= dueOffset(index, p.rate)
	}
	if !p.lat[index].CompareAndSwap(0, int64(d)+1) {
		p.dups.Add(1)
		return
	}
	for {
		l := p.last.Load()
		if int64(at.Sub(p.t0)) <= l || p.last.CompareAndSwap(l, int64(at.Sub(p.t0))) {
			break
		}
	}
	p.got.Add(1)
}

// wait returns once want messages were handled, or fails when the count
// does not move for stall.
func (p *phaseRec) wait(ctx context.Context, want int) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	last, moved := p.got.Load(), time.Now()
	for {
		now := p.got.Load()
		if int(now) >= want {
			return nil
		}
		if now != last {
			last, moved = now, time.Now()
		} else if time.Since(moved) > stall {
			return fmt.Errorf("phase %d stalled at %d of %d messages", p.id, now, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (p *phaseRec) latencies() []time.Duration {
	out := make([]time.Duration, 0, len(p.lat))
	for i := range p.lat {
		if v := p.lat[i].Load(); v > 0 {
			out = append(out, time.Duration(v-1))
		}
	}
	return out
}

// percentiles are nearest-rank: the smallest value with at least p of
// them at or below it.
func percentiles(ds []time.Duration, ps ...float64) []time.Duration {
	out := make([]time.Duration, len(ps))
	if len(ds) == 0 {
		return out
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	for k, p := range ps {
		i := int(math.Ceil(float64(len(s))*p-1e-9)) - 1
		out[k] = s[min(max(i, 0), len(s)-1)]
	}
	return out
}

// runLatency calibrates e's pipeline, then offers it each load.
func runLatency(ctx context.Context, e *env, m *meter, open openPipe) error {
	if err := e.admin.declare(e.queue); err != nil {
		return err
	}
	var cur atomic.Pointer[phaseRec]
	sink := func(body []byte) {
		at := time.Now()
		ph, i, ok := parseLatencyBody(body)
		p := cur.Load()
		if !ok {
			p.bad.Add(1)
			return
		}
		p.arrive(ph, i, at)
	}
	warm := newPhase(0, e.cfg.channels, 0)
	warm.t0 = time.Now()
	cur.Store(warm)
	pipe, err := open(ctx, e, sink)
	if err != nil {
		return err
	}
	defer func() {
		if pipe != nil {
			_ = pipe.close(context.Background())
		}
	}()
	// Warm-up, untimed: one message per confirm channel, so lazily opened
	// channels are open and acemq's consumer is past its probation.
	for i := range e.cfg.channels {
		if err := pipe.publish(ctx, latencyBody(e.cfg.bodySize, 0, i)); err != nil {
			return err
		}
	}
	if err := warm.wait(ctx, e.cfg.channels); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	m.start()
	total := 0
	maxRate := e.cfg.latencyRate
	if maxRate <= 0 {
		r, n, err := calibrate(ctx, e, pipe, &cur)
		if err != nil {
			return err
		}
		maxRate, total = r, n
	}
	for k, load := range e.cfg.latencyLoads {
		rate := load * maxRate
		n := max(1, int(rate*e.cfg.latencySeconds.Seconds()))
		p := newPhase(2+k, n, rate)
		out := make(chan int, n)
		pcx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var once sync.Once
		var perr error
		for range e.cfg.publishers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range out {
					if err := pipe.publish(pcx, latencyBody(e.cfg.bodySize, p.id, i)); err != nil {
						once.Do(func() { perr = err; cancel() })
						return
					}
				}
			}()
		}
		p.t0 = time.Now()
		cur.Store(p)
		pace(pcx, p.t0, rate, n, out)
		close(out)
		wg.Wait()
		cancel()
		if perr != nil {
			return fmt.Errorf("load %.0f%%: %w", load*100, perr)
		}
		if err := p.wait(ctx, n); err != nil {
			return fmt.Errorf("load %.0f%%: %w", load*100, err)
		}
		if b := p.bad.Load(); b > 0 {
			return fmt.Errorf("load %.0f%%: %d deliveries of another phase or unreadable", load*100, b)
		}
		q := percentiles(p.latencies(), 0.50, 0.99, 0.999, 1)
		m.latency = append(m.latency, loadLatency{load: load, maxRate: maxRate, rate: rate, n: n,
			p50: q[0], p99: q[1], p999: q[2], max: q[3], dups: int(p.dups.Load())})
		total += n
	}
	m.stop()
	e.n = max(total, 1)
	err = pipe.close(ctx)
	pipe = nil
	if err != nil {
		return err
	}
	return expectEmpty(e)
}

// calibrate publishes closed-loop for cfg.latencyCalibrate and returns the
// pipeline's rate: messages handled over the time from the first publish to
// the last one handled.
func calibrate(ctx context.Context, e *env, pipe *latencyPipe, cur *atomic.Pointer[phaseRec]) (float64, int, error) {
	// At most the rate the window allows for the time given; ample room.
	const ceiling = 200_000
	p := newPhase(1, int(ceiling*e.cfg.latencyCalibrate.Seconds())+1, 0)
	var next atomic.Int64
	p.t0 = time.Now()
	cur.Store(p)
	deadline := p.t0.Add(e.cfg.latencyCalibrate)
	// Not publishAll: its first error cancels the publishes under way,
	// and a message cancelled before it was sent would be waited for in
	// vain. Each goroutine stops taking indexes at the deadline; the
	// publishes under way finish.
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		stop  atomic.Bool
	)
	for range e.cfg.publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && time.Now().Before(deadline) {
				i := int(next.Add(1)) - 1
				if i >= len(p.lat) {
					return
				}
				if err := pipe.publish(ctx, latencyBody(e.cfg.bodySize, 1, i)); err != nil {
					once.Do(func() { first = err; stop.Store(true) })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, 0, fmt.Errorf("calibration: %w", first)
	}
	n := int(min(next.Load(), int64(len(p.lat))))
	if err := p.wait(ctx, n); err != nil {
		return 0, 0, fmt.Errorf("calibration: %w", err)
	}
	elapsed := time.Duration(p.last.Load())
	if n == 0 || elapsed <= 0 {
		return 0, 0, errors.New("calibration: nothing handled")
	}
	return float64(n) / elapsed.Seconds(), n, nil
}

func openAcemqPipe(ctx context.Context, e *env, sink func([]byte)) (*latencyPipe, error) {
	pt, err := rabbitmq.Dial(ctx, e.cfg.url,
		rabbitmq.WithInFlight(e.cfg.window), rabbitmq.WithPublishChannels(e.cfg.channels),
		rabbitmq.WithConnectionName("bench acemq publisher"))
	if err != nil {
		return nil, err
	}
	ct, err := rabbitmq.Dial(ctx, e.cfg.url, rabbitmq.WithConnectionName("bench acemq"))
	if err != nil {
		_ = pt.Close()
		return nil, err
	}
	mux := acemq.NewMux()
	mux.Use(defaultChain()...)
	mux.HandleFunc(e.queue, func(_ context.Context, msg *acemq.Message) ack.Ack {
		sink(msg.Body())
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: ct, Handler: mux, Prefetch: e.cfg.prefetch, Concurrency: e.cfg.workers}
	if err := ct.Declare(ctx, acemq.Topology(e.queue, srv.Retry, nil)); err != nil {
		_, _ = pt.Close(), ct.Close()
		return nil, err
	}
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(context.WithoutCancel(ctx)) }()
	pub := &acemq.Publisher{Transport: pt, Mandatory: true}
	return &latencyPipe{
		publish: func(ctx context.Context, body []byte) error {
			_, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: e.queue, Body: body, ContentType: "application/json"})
			return err
		},
		close: func(ctx context.Context) error {
			err := srv.Shutdown(ctx)
			if rerr := <-ran; err == nil {
				err = rerr
			}
			if cerr := ct.Close(); err == nil {
				err = cerr
			}
			if cerr := pt.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}, nil
}

func openRawPipe(ctx context.Context, e *env, sink func([]byte)) (*latencyPipe, error) {
	dial := func(name string) (*amqp.Connection, error) {
		return amqp.DialConfig(e.cfg.url, amqp.Config{Properties: amqp.Table{"connection_name": name}})
	}
	pc, err := dial("bench amqp091 publisher")
	if err != nil {
		return nil, err
	}
	cc, err := dial("bench amqp091")
	if err != nil {
		_ = pc.Close()
		return nil, err
	}
	fail := func(err error) (*latencyPipe, error) { _, _ = pc.Close(), cc.Close(); return nil, err }
	chans := make([]*amqp.Channel, e.cfg.channels)
	for i := range chans {
		if chans[i], err = pc.Channel(); err != nil {
			return fail(err)
		}
		if err := chans[i].Confirm(false); err != nil {
			return fail(err)
		}
	}
	ch, err := cc.Channel()
	if err != nil {
		return fail(err)
	}
	if err := ch.Qos(e.cfg.prefetch, 0, false); err != nil {
		return fail(err)
	}
	deliveries, err := ch.Consume(e.queue, "", false, false, false, false, nil)
	if err != nil {
		return fail(err)
	}
	consumed := make(chan error, 1)
	go func() { // one goroutine acking each delivery, as in the consume scenario
		for d := range deliveries {
			sink(d.Body)
			if err := d.Ack(false); err != nil {
				consumed <- err
				for range deliveries {
				}
				return
			}
		}
		consumed <- nil
	}()
	window := make(chan struct{}, e.cfg.window)
	var rr atomic.Uint64
	return &latencyPipe{
		publish: func(ctx context.Context, body []byte) error {
			// The headers and properties acemq writes, as in the publish scenario.
			id, now := newID(), time.Now()
			msg := amqp.Publishing{
				Headers: amqp.Table{
					acemq.HeaderID: id, acemq.HeaderAttempt: int64(1), acemq.HeaderCreated: now.UnixMilli(),
					acemq.HeaderExchange: "", acemq.HeaderRoutingKey: e.queue,
				},
				ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: id,
				Timestamp: now.Truncate(time.Second), Body: body,
			}
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			defer func() { <-window }()
			dc, err := chans[rr.Add(1)%uint64(len(chans))].PublishWithDeferredConfirmWithContext(ctx, "", e.queue, true, false, msg)
			if err != nil {
				return err
			}
			ok, err := dc.WaitContext(ctx)
			if err == nil && !ok {
				err = errors.New("nacked")
			}
			return err
		},
		close: func(context.Context) error {
			err := ch.Close() // ends deliveries
			if cerr := <-consumed; err == nil {
				err = cerr
			}
			_, _ = cc.Close(), pc.Close()
			return err
		},
	}, nil
}

func openWatermillPipe(ctx context.Context, e *env, sink func([]byte)) (*latencyPipe, error) {
	c := watermillQueueConfig(e)
	c.Publish.ConfirmDelivery = true
	c.Publish.ChannelPoolSize = e.cfg.window
	c.Publish.Mandatory = true
	pub, err := wamqp.NewPublisher(c, watermill.NopLogger{})
	if err != nil {
		return nil, err
	}
	sub, err := wamqp.NewSubscriber(watermillQueueConfig(e), watermill.NopLogger{})
	if err != nil {
		_ = pub.Close()
		return nil, err
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		_, _ = pub.Close(), sub.Close()
		return nil, err
	}
	router.AddConsumerHandler("bench", e.queue, sub, func(msg *message.Message) error {
		sink(msg.Payload)
		return nil
	})
	ran := make(chan error, 1)
	go func() { ran <- router.Run(context.WithoutCancel(ctx)) }()
	select {
	case <-router.Running():
	case err := <-ran:
		_, _ = pub.Close(), sub.Close()
		return nil, fmt.Errorf("router: %w", err)
	}
	return &latencyPipe{
		publish: func(ctx context.Context, body []byte) error {
			msg := message.NewMessage(watermill.NewUUID(), body)
			msg.SetContext(ctx)
			return pub.Publish(e.queue, msg)
		},
		close: func(context.Context) error {
			err := router.Close()
			if rerr := <-ran; err == nil {
				err = rerr
			}
			if cerr := sub.Close(); err == nil {
				err = cerr
			}
			if cerr := pub.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}, nil
}

// latencyTarget is the issue's: acemq's p99 at half load at most raw
// amqp091-go's plus this, in the same round.
const (
	latencyTargetLoad = 0.5
	latencyTarget     = time.Millisecond
)

// latencyRow is one system at one load over the rounds, in ms. acemq's
// carries, for each round, its p50 and p99 minus raw amqp091-go's at the
// same load in the same round (VsRaw), and their ratio.
type latencyRow struct {
	Load        float64   `json:"load"`
	MaxMsgsPerS spread    `json:"max_msgs_per_s"` // the calibrated maximum (or -latency-rate)
	Offered     spread    `json:"offered_msgs_per_s"`
	N           []int     `json:"per_round_n"`
	P50         spread    `json:"p50_ms"`
	P99         spread    `json:"p99_ms"`
	P999        spread    `json:"p99_9_ms"`
	Max         spread    `json:"max_ms"`
	Dups        int       `json:"duplicates,omitempty"`
	P50VsRaw    *spread   `json:"p50_minus_amqp091_ms,omitempty"`
	P99VsRaw    *spread   `json:"p99_minus_amqp091_ms,omitempty"`
	P99RatioRaw *spread   `json:"p99_over_amqp091,omitempty"`
	TargetMet   *bool     `json:"target_met,omitempty"` // at half load: acemq p99 − raw p99 ≤ 1 ms (the median over rounds)
	PerRoundP99 []float64 `json:"per_round_p99_ms"`
}

func latencyRows(results []result) []row {
	type key struct {
		sys  string
		load float64
	}
	byKey := map[key]map[int]loadLatency{} // → round → figures
	var loads []float64
	for _, r := range results {
		if r.scenario != "latency" {
			continue
		}
		for _, l := range r.latency {
			k := key{r.system, l.load}
			if byKey[k] == nil {
				byKey[k] = map[int]loadLatency{}
			}
			byKey[k][r.round] = l
			if !slices.Contains(loads, l.load) {
				loads = append(loads, l.load)
			}
		}
	}
	var rows []row
	for _, sys := range allSystems {
		for _, load := range loads {
			rounds := byKey[key{sys, load}]
			if len(rounds) == 0 {
				continue
			}
			var maxes, offered, p50, p99, p999, mx, d50, d99, ratio []float64
			lr := &latencyRow{Load: load}
			for _, round := range slices.Sorted(maps.Keys(rounds)) {
				l := rounds[round]
				maxes, offered = append(maxes, l.maxRate), append(offered, l.rate)
				p50, p99, p999, mx = append(p50, ms(l.p50)), append(p99, ms(l.p99)), append(p999, ms(l.p999)), append(mx, ms(l.max))
				lr.N = append(lr.N, l.n)
				lr.Dups += l.dups
				if raw, ok := byKey[key{rawSys, load}][round]; ok && sys == acemqSys {
					d50, d99 = append(d50, ms(l.p50-raw.p50)), append(d99, ms(l.p99-raw.p99))
					if raw.p99 > 0 {
						ratio = append(ratio, float64(l.p99)/float64(raw.p99))
					}
				}
			}
			lr.MaxMsgsPerS, lr.Offered = spreadOf(maxes), spreadOf(offered)
			lr.P50, lr.P99, lr.P999, lr.Max = spreadOf(p50), spreadOf(p99), spreadOf(p999), spreadOf(mx)
			lr.PerRoundP99 = p99
			if len(d99) > 0 {
				a, b := spreadOf(d50), spreadOf(d99)
				lr.P50VsRaw, lr.P99VsRaw = &a, &b
				if len(ratio) > 0 {
					c := spreadOf(ratio)
					lr.P99RatioRaw = &c
				}
				if load == latencyTargetLoad {
					met := b.Median <= ms(latencyTarget)
					lr.TargetMet = &met
				}
			}
			rows = append(rows, row{Scenario: "latency", System: sys, MsgsPerS: lr.Offered.Median, PerRound: offered,
				Rounds: len(rounds), N: lr.N[0], Latency: lr})
		}
	}
	return rows
}

// writeLatencyTable prints the latency rows, if any, and acemq's
// differences to raw amqp091-go.
func writeLatencyTable(w io.Writer, rows []row) {
	var lat []row
	for _, r := range rows {
		if r.Latency != nil {
			lat = append(lat, r)
		}
	}
	if len(lat) == 0 {
		return
	}
	cell := func(s spread) string { return fmt.Sprintf("%.2f (%.2f–%.2f)", s.Median, s.Min, s.Max) }
	fmt.Fprintf(w, "\npublish → handler latency, ms: the median over %d rounds (min–max); open loop at a share of the max msgs/s (each pipeline's calibrated maximum, or -latency-rate)\n", lat[0].Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tload\tmax msgs/s\toffered msgs/s\tn\tp50\tp99\tp99.9\tmax\t")
	for _, r := range lat {
		l := r.Latency
		fmt.Fprintf(tw, "%s\t%.0f%%\t%.0f\t%.0f\t%d\t%s\t%s\t%s\t%s\t\n", r.System, l.Load*100, l.MaxMsgsPerS.Median, l.Offered.Median,
			r.N, cell(l.P50), cell(l.P99), cell(l.P999), cell(l.Max))
	}
	tw.Flush()
	var vs []row
	for _, r := range lat {
		if r.Latency.P99VsRaw != nil {
			vs = append(vs, r)
		}
	}
	if len(vs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nacemq − amqp091 in the same round, ms: the median (min–max)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "load\tp50\tp99\tp99 ratio\t")
	for _, r := range vs {
		l := r.Latency
		verdict := ""
		if l.TargetMet != nil {
			verdict = fmt.Sprintf("  (target p99 ≤ amqp091 + %.0f ms: ", ms(latencyTarget))
			if *l.TargetMet {
				verdict += "ok)"
			} else {
				verdict += "MISSED)"
			}
		}
		ratio := "-"
		if l.P99RatioRaw != nil {
			ratio = fmt.Sprintf("%.2f× (%.2f–%.2f×)", l.P99RatioRaw.Median, l.P99RatioRaw.Min, l.P99RatioRaw.Max)
		}
		fmt.Fprintf(tw, "%.0f%%\t%+.2f (%+.2f–%+.2f)\t%+.2f (%+.2f–%+.2f)%s\t%s\t\n", l.Load*100, l.P50VsRaw.Median, l.P50VsRaw.Min, l.P50VsRaw.Max,
			l.P99VsRaw.Median, l.P99VsRaw.Min, l.P99VsRaw.Max, verdict, ratio)
	}
	tw.Flush()
}

// latencyNote is the progress line's tail for a latency run.
func latencyNote(r result) string {
	s := ""
	for _, l := range r.latency {
		s += fmt.Sprintf("  %.0f%% of %.0f: p50 %.2f p99 %.2f p99.9 %.2f ms", l.load*100, l.maxRate, ms(l.p50), ms(l.p99), ms(l.p999))
	}
	return s
}

// parseLoads reads -latency-loads: fractions in (0, 1.5].
func parseLoads(s string) ([]float64, error) {
	var out []float64
	for _, f := range splitList(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 || v > 1.5 {
			return nil, fmt.Errorf("-latency-loads: %q is not a fraction of the maximum in (0, 1.5]", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("-latency-loads: none given")
	}
	return out, nil
}
