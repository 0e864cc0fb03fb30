package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The lateness command: n scheduled publishes with delays drawn uniformly
// from [min, max], consumed from their destination queue, and for each
// message its lateness, arrival − due. A message is never to arrive
// early, nor go missing; how late it is measures the delay
// infrastructure's resolution (125 ms, rounded up at publish, so not in
// the lateness) plus the broker's latency over its hops.

type latenessConfig struct {
	url        string
	n          int
	min, max   time.Duration
	publishers int
	window     int
	prefetch   int
	bodySize   int
	grace      time.Duration
	seed       uint64
	csvPath    string
	json       bool
	quiet      bool
}

func parseLatenessFlags(args []string, stderr io.Writer) (latenessConfig, error) {
	var c latenessConfig
	fs := flag.NewFlagSet("bench lateness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "amqp", os.Getenv("ACEMQ_AMQP_URL"), "RabbitMQ URL (default $ACEMQ_AMQP_URL)")
	fs.IntVar(&c.n, "n", 2000, "messages")
	fs.DurationVar(&c.min, "min", time.Second, "shortest delay")
	fs.DurationVar(&c.max, "max", 120*time.Second, "longest delay")
	fs.IntVar(&c.publishers, "publishers", 8, "publishing goroutines")
	fs.IntVar(&c.window, "window", 64, "publishes awaiting a confirm at most")
	fs.IntVar(&c.prefetch, "prefetch", 500, "consumer prefetch")
	fs.IntVar(&c.bodySize, "body", 256, "body size in bytes (a JSON object)")
	fs.DurationVar(&c.grace, "grace", 30*time.Second, "how long past the last due time to wait before counting a message missing")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the delays (0: a random one, printed)")
	fs.StringVar(&c.csvPath, "csv", "", "write one row per message to this file")
	fs.BoolVar(&c.json, "json", false, "print the summary as one JSON object")
	fs.BoolVar(&c.quiet, "q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.url == "":
		return c, errors.New("lateness needs a broker: -amqp URL or $ACEMQ_AMQP_URL")
	case c.n < 1 || c.publishers < 1 || c.window < 1 || c.prefetch < 1 || c.bodySize < 16 || c.grace <= 0:
		return c, errors.New("counts and -grace must be positive (body at least 16 bytes)")
	case c.min <= 0 || c.max < c.min:
		return c, fmt.Errorf("delays must satisfy 0 < -min ≤ -max (have %v, %v)", c.min, c.max)
	case c.max > delay.Max:
		return c, fmt.Errorf("-max %v is over the delay infrastructure's %v", c.max, delay.Max)
	}
	if c.seed == 0 {
		c.seed = rand.Uint64()
	}
	return c, nil
}

// latRecord is one message: what was asked, when it was published, and
// when it came back.
type latRecord struct {
	asked      time.Duration // the delay drawn
	wait       time.Duration // asked rounded up to the unit
	published  time.Time     // just before Publish
	confirmed  time.Time     // Publish returned
	dueHeader  int64         // x-acemq-due of the first arrival, Unix ms; 0 when absent
	arrived    time.Time     // the first arrival; zero while missing
	deliveries int           // arrivals, duplicates included
}

// due is the later of x-acemq-due and the publish's start plus the
// rounded delay: the header's milliseconds are truncated, and the later
// bound keeps a sub-millisecond early arrival from hiding in them.
func (r latRecord) due() time.Time {
	d := r.published.Add(r.wait)
	if r.dueHeader != 0 {
		if h := time.UnixMilli(r.dueHeader); h.After(d) {
			return h
		}
	}
	return d
}

func (r latRecord) hops() int {
	return bits.OnesCount64(uint64(r.wait / delay.Unit))
}

// dist is a distribution of durations.
type dist struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// distOf summarises ds with nearest-rank percentiles.
func distOf(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(float64(len(s))*p)) - 1
		return ms(s[min(max(i, 0), len(s)-1)])
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return dist{N: len(s), Min: ms(s[0]), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: ms(s[len(s)-1]),
		Mean: ms(sum / time.Duration(len(s)))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latSummary is what the command reports.
type latSummary struct {
	N          int     `json:"n"`
	MinDelay   string  `json:"min_delay"`
	MaxDelay   string  `json:"max_delay"`
	Seed       uint64  `json:"seed"`
	PublishS   float64 `json:"publish_s"`
	Arrived    int     `json:"arrived"`
	Missing    int     `json:"missing"`
	Early      int     `json:"early"`
	Duplicates int     `json:"duplicates"`
	Foreign    int     `json:"foreign"` // deliveries that were no message of the run
	NoHeader   int     `json:"due_header_absent"`
	// Lateness is arrival − due; AfterAsked is arrival − (publish + the
	// delay asked), what a user sees, rounding to the unit included.
	Lateness   dist         `json:"lateness"`
	AfterAsked dist         `json:"after_asked"`
	ByHops     map[int]dist `json:"lateness_by_hops"`
}

// latRun is what a run measured.
type latRun struct {
	recs        []latRecord
	foreign     int
	publishTime time.Duration
}

func summarizeLateness(c latenessConfig, run latRun) latSummary {
	recs := run.recs
	s := latSummary{N: len(recs), MinDelay: c.min.String(), MaxDelay: c.max.String(), Seed: c.seed,
		PublishS: run.publishTime.Seconds(), Foreign: run.foreign, ByHops: map[int]dist{}}
	var late, asked []time.Duration
	byHops := map[int][]time.Duration{}
	for _, r := range recs {
		if r.arrived.IsZero() {
			s.Missing++
			continue
		}
		s.Arrived++
		s.Duplicates += r.deliveries - 1
		if r.dueHeader == 0 {
			s.NoHeader++
		}
		l := r.arrived.Sub(r.due())
		if l < 0 {
			s.Early++
		}
		late = append(late, l)
		asked = append(asked, r.arrived.Sub(r.published.Add(r.asked)))
		byHops[r.hops()] = append(byHops[r.hops()], l)
	}
	s.Lateness, s.AfterAsked = distOf(late), distOf(asked)
	for h, ls := range byHops {
		s.ByHops[h] = distOf(ls)
	}
	return s
}

func runLateness(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseLatenessFlags(args, stderr)
	if err != nil {
		return err
	}
	progress := stderr
	if cfg.quiet {
		progress = io.Discard
	}
	run, err := measureLateness(ctx, cfg, progress)
	if err != nil {
		return err
	}
	s := summarizeLateness(cfg, run)
	if cfg.csvPath != "" {
		if err := writeLatenessCSV(cfg.csvPath, run.recs); err != nil {
			return err
		}
	}
	if cfg.json {
		if err := json.NewEncoder(stdout).Encode(s); err != nil {
			return err
		}
	} else {
		writeLateness(stdout, s)
	}
	if s.Early > 0 || s.Missing > 0 {
		return fmt.Errorf("%d early and %d missing, both must be 0", s.Early, s.Missing)
	}
	return nil
}

// measureLateness publishes, consumes and cleans up; it returns every
// message's record and how long publishing took.
func measureLateness(ctx context.Context, cfg latenessConfig, progress io.Writer) (run latRun, err error) {
	adm, err := dialAdmin(cfg.url)
	if err != nil {
		return run, err
	}
	defer adm.close()
	tr, err := rabbitmq.Dial(ctx, cfg.url, rabbitmq.WithInFlight(cfg.window), rabbitmq.WithConnectionName("bench lateness"))
	if err != nil {
		return run, err
	}
	defer tr.Close()

	runID := newID()[:8]
	queue := fmt.Sprintf("bench.%s.lateness", runID)
	if err := declareDelayed(ctx, tr, queue, nil); err != nil {
		return run, err
	}
	othersWaiting, err := adm.waiting()
	if err != nil {
		return run, err
	}
	defer func() {
		derr := adm.deleteQueues(queue)
		// Messages still on their way would reach the undeliverable queue
		// once due; take them off the levels if nothing else waits there.
		missing := 0
		for _, r := range run.recs {
			if r.arrived.IsZero() {
				missing++
			}
		}
		if missing > 0 || err != nil {
			if othersWaiting == 0 {
				if perr := adm.purge(delayQueues()...); derr == nil {
					derr = perr
				}
			} else {
				fmt.Fprintf(progress, "lateness: messages of this run may still wait in the delay queues (which held %d others at the start): they will reach %s\n",
					othersWaiting, delay.Undeliverable)
			}
		}
		if err == nil {
			err = derr
		}
	}()

	rng := rand.New(rand.NewPCG(cfg.seed, 0x1a7e))
	recs := make([]latRecord, cfg.n)
	for i := range recs {
		d := cfg.min + time.Duration(rng.Int64N(int64(cfg.max-cfg.min)+1))
		units, err := delay.Units(d)
		if err != nil {
			return run, err
		}
		recs[i] = latRecord{asked: d, wait: time.Duration(units) * delay.Unit}
	}
	idPrefix := "lat-" + runID + "-"
	col := &collector{recs: recs, prefix: idPrefix, all: make(chan struct{})}

	sub, err := tr.Consume(ctx, queue, transport.ConsumeOptions{Prefetch: cfg.prefetch})
	if err != nil {
		return run, err
	}
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for d := range sub.Deliveries() {
			col.arrive(d, time.Now())
			_ = d.Ack()
		}
	}()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sub.Cancel(cctx)
		_ = sub.Close()
		<-consumed
	}()

	fmt.Fprintf(progress, "lateness: %d messages to %s, delays uniform in [%v, %v], seed %d\n", cfg.n, queue, cfg.min, cfg.max, cfg.seed)
	p := &acemq.Publisher{Transport: tr, Mandatory: true}
	body := jsonBody(cfg.bodySize)
	began := time.Now()
	err = publishAll(ctx, cfg.publishers, cfg.n, func(ctx context.Context, i int) error {
		o := acemq.Outgoing{RoutingKey: queue, ID: idPrefix + strconv.Itoa(i), Body: body, ContentType: "application/json", Delay: recs[i].asked}
		col.mu.Lock()
		recs[i].published = time.Now()
		col.mu.Unlock()
		_, err := p.Publish(ctx, o)
		col.mu.Lock()
		recs[i].confirmed = time.Now()
		col.mu.Unlock()
		return err
	})
	publishTime := time.Since(began)
	done := func(err error) (latRun, error) {
		return latRun{recs: col.snapshot(), foreign: col.foreignCount(), publishTime: publishTime}, err
	}
	if err != nil {
		return done(err)
	}
	var lastDue time.Time
	for _, r := range col.snapshot() {
		if d := r.confirmed.Add(r.wait); d.After(lastDue) {
			lastDue = d
		}
	}
	fmt.Fprintf(progress, "lateness: published in %.1fs; the last is due in %.0fs\n", publishTime.Seconds(), time.Until(lastDue).Seconds())

	deadline := time.NewTimer(time.Until(lastDue.Add(cfg.grace)))
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-col.all:
			return done(nil)
		case <-deadline.C:
			return done(nil)
		case <-ctx.Done():
			return done(ctx.Err())
		case <-tick.C:
			fmt.Fprintf(progress, "lateness: %d of %d arrived\n", col.count(), cfg.n)
		}
	}
}

// collector records arrivals against the published messages.
type collector struct {
	mu      sync.Mutex
	recs    []latRecord
	prefix  string
	arrived int
	foreign int // deliveries that are no message of this run
	all     chan struct{}
}

func (c *collector) arrive(d transport.Delivery, at time.Time) {
	id, _ := d.Headers[acemq.HeaderID].(string)
	i, err := strconv.Atoi(strings.TrimPrefix(id, c.prefix))
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strings.HasPrefix(id, c.prefix) || err != nil || i < 0 || i >= len(c.recs) {
		c.foreign++
		return
	}
	r := &c.recs[i]
	r.deliveries++
	if r.deliveries > 1 {
		return
	}
	r.arrived = at
	if due, ok := transport.Int64(d.Headers[delay.DueHeader]); ok {
		r.dueHeader = due
	}
	if c.arrived++; c.arrived == len(c.recs) {
		close(c.all)
	}
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.arrived
}

func (c *collector) foreignCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.foreign
}

func (c *collector) snapshot() []latRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.recs)
}

func writeLateness(w io.Writer, s latSummary) {
	fmt.Fprintf(w, "lateness: %d messages, delays uniform in [%s, %s] (seed %d), published in %.1fs\n",
		s.N, s.MinDelay, s.MaxDelay, s.Seed, s.PublishS)
	fmt.Fprintf(w, "early %d (must be 0), missing %d (must be 0), duplicates %d, x-acemq-due absent %d, foreign deliveries %d\n",
		s.Early, s.Missing, s.Duplicates, s.NoHeader, s.Foreign)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ms\tn\tmin\tp50\tp90\tp99\tmax\tmean\t")
	line := func(name string, d dist) {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", name, d.N, d.Min, d.P50, d.P90, d.P99, d.Max, d.Mean)
	}
	line("arrival − due", s.Lateness)
	line("arrival − (publish + delay asked)", s.AfterAsked)
	hops := make([]int, 0, len(s.ByHops))
	for h := range s.ByHops {
		hops = append(hops, h)
	}
	slices.Sort(hops)
	for _, h := range hops {
		line(fmt.Sprintf("arrival − due, %d hop%s", h, map[bool]string{true: "s"}[h != 1]), s.ByHops[h])
	}
	tw.Flush()
}

func writeLatenessCSV(path string, recs []latRecord) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"i", "asked_ms", "wait_ms", "hops", "published_unix_ms", "confirm_ms", "due_header_unix_ms", "lateness_ms", "deliveries"})
	for i, r := range recs {
		late := ""
		if !r.arrived.IsZero() {
			late = strconv.FormatFloat(ms(r.arrived.Sub(r.due())), 'f', 3, 64)
		}
		_ = w.Write([]string{strconv.Itoa(i), strconv.FormatFloat(ms(r.asked), 'f', 3, 64), strconv.FormatInt(r.wait.Milliseconds(), 10),
			strconv.Itoa(r.hops()), strconv.FormatInt(r.published.UnixMilli(), 10), strconv.FormatFloat(ms(r.confirmed.Sub(r.published)), 'f', 3, 64),
			strconv.FormatInt(r.dueHeader, 10), late, strconv.Itoa(r.deliveries)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
