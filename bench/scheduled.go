package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The scheduled command: the throughput of scheduled publishes
// (Outgoing.Delay) against plain confirmed publishes to the same queue, as
// ratios within rounds, like the comparison run's. A scheduled publish is
// measured as a user sees it: the passive declare of its destination
// first, then the publish to a level exchange, whose quorum queue holds
// it. Two more modes take that cost apart: plain publishes to a quorum
// queue (what the level queue costs against a classic queue), aimed
// publishes (a scheduled publish without its passive declare: the same
// headers, routed by delay.Aim, straight to the transport), and the
// passive declares alone.

// The modes, in their default order.
const (
	plainMode     = "plain"
	scheduledMode = "scheduled"
	quorumMode    = "quorum"
	aimedMode     = "aimed"
	inspectMode   = "inspect"
)

var allModes = []string{plainMode, scheduledMode, quorumMode, aimedMode, inspectMode}

// quorumArgs are a level queue's arguments without its TTL and
// dead-lettering: a quorum queue that only holds.
var quorumArgs = map[string]any{"x-queue-type": "quorum", "x-overflow": "reject-publish"}

type scheduledConfig struct {
	url        string
	rounds     int
	n          int
	delay      time.Duration
	publishers int
	window     int
	channels   int
	bodySize   int
	modes      []string
	brokerPID  int
	json       bool
	quiet      bool
}

func parseScheduledFlags(args []string, stderr io.Writer) (scheduledConfig, error) {
	var c scheduledConfig
	fs := flag.NewFlagSet("bench scheduled", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "amqp", os.Getenv("ACEMQ_AMQP_URL"), "RabbitMQ URL (default $ACEMQ_AMQP_URL), in a vhost of your own: the run purges its delay queues")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds; each runs every mode, the order rotating")
	fs.IntVar(&c.n, "n", 5000, "publishes per mode and round")
	fs.DurationVar(&c.delay, "delay", time.Hour, "the scheduled publishes' delay (at least 10m, so that none leaves its first level during the run)")
	fs.IntVar(&c.publishers, "publishers", 64, "publishing goroutines")
	fs.IntVar(&c.window, "window", 64, "publishes awaiting a confirm at most")
	fs.IntVar(&c.channels, "channels", 4, "confirm channels")
	fs.IntVar(&c.bodySize, "body", 256, "body size in bytes (a JSON object)")
	modes := fs.String("modes", strings.Join(allModes, ","), "modes to run: plain (confirmed publish to a classic queue), scheduled (the same with Delay), quorum (confirmed publish to a quorum queue), aimed (scheduled without the passive declare), inspect (the passive declare alone)")
	fs.IntVar(&c.brokerPID, "broker-pid", 0, "the broker's process id, for its CPU time per message; 0 looks for it, -1 turns it off")
	fs.BoolVar(&c.json, "json", false, "print one JSON object per mode")
	fs.BoolVar(&c.quiet, "q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.modes = splitList(*modes)
	for _, m := range c.modes {
		if !slices.Contains(allModes, m) {
			return c, fmt.Errorf("unknown mode %q (have %s)", m, strings.Join(allModes, ", "))
		}
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.url == "":
		return c, errors.New("scheduled needs a broker: -amqp URL or $ACEMQ_AMQP_URL")
	case !slices.Contains(c.modes, plainMode) || !slices.Contains(c.modes, scheduledMode):
		return c, errors.New("-modes must include plain and scheduled: the ratio is between them")
	case c.rounds < 1 || c.n < 1 || c.publishers < 1 || c.window < 1 || c.channels < 1 || c.bodySize < 16:
		return c, errors.New("counts must be positive (body at least 16 bytes)")
	case c.delay < 10*time.Minute || c.delay > delay.Max:
		return c, fmt.Errorf("-delay %v: want 10m to %v", c.delay, delay.Max)
	}
	return c, nil
}

// schedEnv is what every mode's run shares.
type schedEnv struct {
	cfg     scheduledConfig
	adm     *admin
	body    []byte
	queue   string // the destination, classic
	quorumQ string
	level   string // the level queue the scheduled publishes wait on
}

// schedResult is one mode's run in one round.
type schedResult struct {
	mode      string
	round     int
	elapsed   time.Duration
	cpu       time.Duration
	brokerCPU time.Duration
	mallocs   uint64
	bytes     uint64
}

func (r schedResult) rate(n int) float64 { return float64(n) / r.elapsed.Seconds() }

func runScheduled(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	cfg, err := parseScheduledFlags(args, stderr)
	if err != nil {
		return err
	}
	progress := stderr
	if cfg.quiet {
		progress = io.Discard
	}
	if cfg.brokerPID == 0 {
		cfg.brokerPID = brokerPID(cfg.url)
	}
	adm, err := dialAdmin(cfg.url)
	if err != nil {
		return err
	}
	defer adm.close()

	runID := newID()[:8]
	e := &schedEnv{cfg: cfg, adm: adm, body: jsonBody(cfg.bodySize),
		queue: fmt.Sprintf("bench.%s.scheduled", runID), quorumQ: fmt.Sprintf("bench.%s.scheduled.quorum", runID)}
	route, err := delay.RouteTo(e.queue, cfg.delay)
	if err != nil {
		return err
	}
	e.level = route.Exchange // a level's queue has its exchange's name
	if err := e.declare(ctx); err != nil {
		return err
	}
	defer func() {
		if derr := adm.deleteQueues(e.queue, e.quorumQ); err == nil {
			err = derr
		}
	}()
	if n, err := adm.waiting(); err != nil || n > 0 {
		if err != nil {
			return err
		}
		return fmt.Errorf("the delay queues of this vhost hold %d messages: run in a vhost of your own, since the run purges them", n)
	}
	// Every scheduled publish waits on the levels until purged here:
	// nothing else waited in them when the run began.
	defer func() {
		perr := adm.purge(delayQueues()...)
		if perr == nil {
			if n, werr := adm.waiting(); werr != nil || n > 0 {
				perr = fmt.Errorf("after the purge the delay queues hold %d messages (%v)", n, werr)
			}
		}
		if err == nil {
			err = perr
		}
	}()

	var results []schedResult
	for round := range cfg.rounds {
		for _, mode := range rotate(cfg.modes, round) {
			if err := ctx.Err(); err != nil {
				return err
			}
			runtime.GC()
			r, err := e.runMode(ctx, mode)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, mode, err)
			}
			r.round = round + 1
			results = append(results, r)
			fmt.Fprintf(progress, "round %d  %-10s %8.0f msgs/s  CPU µs/msg %5.1f (broker %5.1f)  %6.1f allocs/msg\n",
				round+1, mode, r.rate(cfg.n), micros(r.cpu/time.Duration(cfg.n)), micros(r.brokerCPU/time.Duration(cfg.n)),
				float64(r.mallocs)/float64(cfg.n))
		}
	}
	rows := summarizeScheduled(cfg, results)
	if cfg.json {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	writeScheduled(stdout, cfg, rows)
	return nil
}

// declare declares the delay infrastructure with the destination queue
// bound to it, and the quorum queue.
func (e *schedEnv) declare(ctx context.Context) error {
	tr, err := rabbitmq.Dial(ctx, e.cfg.url, rabbitmq.WithConnectionName("bench scheduled setup"))
	if err != nil {
		return err
	}
	defer tr.Close()
	if err := declareDelayed(ctx, tr, e.queue, nil); err != nil {
		return err
	}
	if slices.Contains(e.cfg.modes, quorumMode) {
		return tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: e.quorumQ, Durable: true, Args: quorumArgs}}})
	}
	return nil
}

// runMode runs one mode once: the timed publishes, then a check that
// every message is where it should be, then (untimed) a purge, so that
// each run starts from empty queues.
func (e *schedEnv) runMode(ctx context.Context, mode string) (schedResult, error) {
	tr, err := rabbitmq.Dial(ctx, e.cfg.url,
		rabbitmq.WithInFlight(e.cfg.window), rabbitmq.WithPublishChannels(e.cfg.channels),
		rabbitmq.WithConnectionName("bench scheduled "+mode))
	if err != nil {
		return schedResult{}, err
	}
	defer tr.Close()
	p := &acemq.Publisher{Transport: tr, Mandatory: true}
	var (
		op     func(ctx context.Context, i int) error
		holder string // where the messages land
	)
	switch mode {
	case plainMode, scheduledMode, quorumMode:
		o := acemq.Outgoing{RoutingKey: e.queue, Body: e.body, ContentType: "application/json"}
		holder = e.queue
		switch mode {
		case scheduledMode:
			o.Delay, holder = e.cfg.delay, e.level
		case quorumMode:
			o.RoutingKey, holder = e.quorumQ, e.quorumQ
		}
		op = func(ctx context.Context, _ int) error {
			_, err := p.Publish(ctx, o)
			return err
		}
	case aimedMode:
		holder = e.level
		op = func(ctx context.Context, _ int) error {
			id, now := newID(), time.Now()
			pub := transport.Publishing{
				RoutingKey: e.queue,
				Mandatory:  true,
				Headers: map[string]any{
					acemq.HeaderID:         id,
					acemq.HeaderAttempt:    int64(1),
					acemq.HeaderCreated:    now.UnixMilli(),
					acemq.HeaderExchange:   "",
					acemq.HeaderRoutingKey: e.queue,
				},
				Properties: transport.Properties{ContentType: "application/json", DeliveryMode: 2, MessageID: id, Timestamp: now.Truncate(time.Second)},
				Body:       e.body,
			}
			if _, err := delay.Aim(&pub, e.queue, e.cfg.delay, now); err != nil {
				return err
			}
			c, err := tr.Publish(ctx, pub)
			if err == nil && !c.Routed {
				err = acemq.ErrUnroutable
			}
			return err
		}
	case inspectMode:
		op = func(ctx context.Context, _ int) error {
			_, err := tr.Inspect(ctx, e.queue)
			return err
		}
	}
	for i := range e.cfg.channels { // opens every confirm channel
		if err := op(ctx, i); err != nil {
			return schedResult{}, err
		}
	}
	m := &meter{brokerPID: e.cfg.brokerPID}
	m.start()
	err = publishAll(ctx, e.cfg.publishers, e.cfg.n, op)
	m.stop()
	if err != nil {
		return schedResult{}, err
	}
	if holder != "" {
		want := e.cfg.n + e.cfg.channels
		got, err := e.adm.count(holder)
		if err != nil {
			return schedResult{}, err
		}
		if got != want {
			return schedResult{}, fmt.Errorf("%d messages in %s, want %d", got, holder, want)
		}
		if err := e.adm.purge(holder); err != nil {
			return schedResult{}, err
		}
	}
	return schedResult{mode: mode, elapsed: m.elapsed, cpu: m.cpu, brokerCPU: m.brokerCPU, mallocs: m.mallocs, bytes: m.bytes}, nil
}

// spread is a median with the range it was taken over.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	return spread{Median: median(xs), Min: slices.Min(xs), Max: slices.Max(xs)}
}

// schedRow is one mode over every round; the ratios are its msgs/s over
// another mode's in the same round.
type schedRow struct {
	Mode         string            `json:"mode"`
	N            int               `json:"n"`
	Rounds       int               `json:"rounds"`
	MsgsPerS     spread            `json:"msgs_per_s"`
	PerRound     []float64         `json:"per_round_msgs_per_s"`
	CPUPerMsgUs  float64           `json:"cpu_us_per_msg"`
	BrokerCPUUs  float64           `json:"broker_cpu_us_per_msg,omitempty"`
	AllocsPerMsg float64           `json:"allocs_per_msg"`
	BytesPerMsg  float64           `json:"bytes_per_msg"`
	Ratios       map[string]spread `json:"ratios,omitempty"` // "vs_plain"
}

// ratioBases are the modes each mode is compared with.
var ratioBases = map[string][]string{
	scheduledMode: {plainMode, quorumMode, aimedMode},
	quorumMode:    {plainMode},
	aimedMode:     {plainMode},
	inspectMode:   {plainMode},
}

func summarizeScheduled(cfg scheduledConfig, results []schedResult) []schedRow {
	byRound := map[string]map[int]float64{}
	var rows []schedRow
	for _, mode := range allModes {
		var rates, cpus, bcpus, allocs, bytes []float64
		for _, r := range results {
			if r.mode != mode {
				continue
			}
			n := float64(cfg.n)
			rates = append(rates, r.rate(cfg.n))
			cpus = append(cpus, micros(r.cpu)/n)
			bcpus = append(bcpus, micros(r.brokerCPU)/n)
			allocs = append(allocs, float64(r.mallocs)/n)
			bytes = append(bytes, float64(r.bytes)/n)
			if byRound[mode] == nil {
				byRound[mode] = map[int]float64{}
			}
			byRound[mode][r.round] = r.rate(cfg.n)
		}
		if len(rates) == 0 {
			continue
		}
		rows = append(rows, schedRow{Mode: mode, N: cfg.n, Rounds: len(rates), MsgsPerS: spreadOf(rates), PerRound: rates,
			CPUPerMsgUs: median(cpus), BrokerCPUUs: median(bcpus), AllocsPerMsg: median(allocs), BytesPerMsg: median(bytes)})
	}
	for i := range rows {
		for _, base := range ratioBases[rows[i].Mode] {
			var ratios []float64
			for round, a := range byRound[rows[i].Mode] {
				if b, ok := byRound[base][round]; ok && b > 0 {
					ratios = append(ratios, a/b)
				}
			}
			if len(ratios) > 0 {
				if rows[i].Ratios == nil {
					rows[i].Ratios = map[string]spread{}
				}
				rows[i].Ratios["vs_"+base] = spreadOf(ratios)
			}
		}
	}
	return rows
}

func writeScheduled(w io.Writer, cfg scheduledConfig, rows []schedRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tn\tmsgs/s (median)\tmin–max\tCPU µs/msg\tbroker CPU µs/msg\tallocs/msg\tB/msg\t")
	for _, r := range rows {
		broker := "-"
		if r.BrokerCPUUs > 0 {
			broker = fmt.Sprintf("%.0f", r.BrokerCPUUs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f–%.0f\t%.1f\t%s\t%.1f\t%.0f\t\n", r.Mode, r.N, r.MsgsPerS.Median, r.MsgsPerS.Min, r.MsgsPerS.Max,
			r.CPUPerMsgUs, broker, r.AllocsPerMsg, r.BytesPerMsg)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nmsgs/s over another mode's in the same round: the median of %d rounds, and their range (scheduled: Delay %v):\n", cfg.rounds, cfg.delay)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		for _, base := range ratioBases[r.Mode] {
			if s, ok := r.Ratios["vs_"+base]; ok {
				fmt.Fprintf(tw, "%s/%s\t%.2f×\t(%.2f–%.2f×)\t\n", r.Mode, base, s.Median, s.Min, s.Max)
			}
		}
	}
	tw.Flush()
}
