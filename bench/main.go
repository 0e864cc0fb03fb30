// Command bench measures acemq against raw amqp091-go and watermill in one
// run, so that every claim is a ratio between figures taken under the same
// load on the same machine:
//
//	go run . -amqp amqp://guest:guest@localhost:5672/benchdev
//
// Each round runs every scenario for every system in turn, rotating the
// order of the systems from round to round; the table shows the median of
// the rounds and the ratios of acemq to each baseline. Without a broker URL
// (-amqp or ACEMQ_AMQP_URL) only the memory scenario runs.
//
// Two subcommands measure the delay infrastructure (package delay) instead:
//
//	go run . lateness -amqp URL    # scheduled messages' arrival − due, 2000 of 1–120 s
//	go run . scheduled -amqp URL   # scheduled publish's msgs/s over plain confirmed publish's
//
// bench is a module of its own so that watermill never becomes a
// dependency of the library.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	url          string
	rounds       int
	n            int // publish and consume
	memoryN      int
	retryN       int
	bodySize     int
	window       int // publishes awaiting a confirm, every system
	channels     int // acemq and raw confirm channels
	publishers   int // publishing goroutines
	prefetch     int
	workers      int // acemq Server concurrency; watermill handlers in retry
	retryDelay   time.Duration
	scenarios    []string
	systems      []string
	json         bool
	brokerPID    int // the broker's process, for its CPU time; 0 finds it, -1 does not
	cpuProfile   string
	memProfile   string
	mutexProfile string
	quiet        bool
	// latency scenario (latency.go)
	latencySeconds   time.Duration // each load
	latencyCalibrate time.Duration // the closed-loop run that finds the maximum
	latencyLoads     []float64     // fractions of the maximum
	latencyRate      float64       // the maximum, msgs/s, for every system; 0 calibrates each
	// partitions scenario (partitions.go)
	partitionN          int
	partitionCounts     []int
	partitionTypes      []string // x-queue-type of every layout
	partitionPublishers int      // publishers, each the publish scenario's
	partitionURLs       []string // a cluster's nodes; empty: url
	partitionCluster    int      // start a private cluster of this many nodes
	partitionNode       string   // rabbitmqctl's -n, for the placement
	partitionPlacement  bool     // read each queue's leader after its run
	// relay scenario (relay.go)
	postgresURL  string
	relayN       int
	relayWriters int           // goroutines committing one row per transaction
	relayLoad    float64       // the paced part's rate, a share of the round's relay msgs/s
	relaySeconds time.Duration // the paced part; 0 skips it
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "amqp", os.Getenv("ACEMQ_AMQP_URL"), "RabbitMQ URL (default $ACEMQ_AMQP_URL); without it only the memory scenario runs")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every scenario for every system, the order rotating")
	fs.IntVar(&c.n, "n", 20000, "messages per publish and consume run")
	fs.IntVar(&c.memoryN, "memory-n", 100000, "messages per memory run")
	fs.IntVar(&c.retryN, "retry-n", 400, "messages per retry run (half fail once)")
	fs.IntVar(&c.bodySize, "body", 256, "body size in bytes (a JSON object)")
	fs.IntVar(&c.window, "window", 64, "publishes awaiting a confirm at most (watermill: its channel pool size)")
	fs.IntVar(&c.channels, "channels", 4, "confirm channels of acemq and raw amqp091-go")
	fs.IntVar(&c.publishers, "publishers", 64, "publishing goroutines")
	fs.IntVar(&c.prefetch, "prefetch", 100, "consumer prefetch")
	fs.IntVar(&c.workers, "workers", 4, "acemq handler concurrency; watermill handlers on the queue in the retry scenario")
	fs.DurationVar(&c.retryDelay, "retry-delay", 100*time.Millisecond, "retry wait (acemq: on a broker rung; watermill: a sleep in the handler)")
	scen := fs.String("scenarios", strings.Join(scenarioNames(), ","), "scenarios to run")
	sys := fs.String("systems", strings.Join(allSystems, ","), "systems to run")
	fs.IntVar(&c.brokerPID, "broker-pid", 0, "the broker's process id, to report its CPU time per message; 0 looks for the process listening on a local URL's port, -1 turns it off")
	fs.BoolVar(&c.json, "json", false, "print one JSON object per scenario and system instead of the table")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile, labelled by system and scenario (go tool pprof -tagfocus system=acemq)")
	fs.StringVar(&c.memProfile, "memprofile", "", "write an allocation profile at the end")
	fs.StringVar(&c.mutexProfile, "mutexprofile", "", "write a mutex contention profile at the end")
	fs.BoolVar(&c.quiet, "q", false, "no progress lines on stderr")
	fs.DurationVar(&c.latencySeconds, "latency-seconds", 2*time.Second, "latency scenario: how long each load is offered")
	fs.DurationVar(&c.latencyCalibrate, "latency-calibrate", 1500*time.Millisecond, "latency scenario: the closed-loop run that measures each pipeline's maximum")
	loads := fs.String("latency-loads", "0.25,0.5,0.9", "latency scenario: the offered rates, as fractions of the maximum")
	fs.Float64Var(&c.latencyRate, "latency-rate", 0, "latency scenario: the maximum in msgs/s for every system, instead of calibrating each")
	partitionFlags(fs, &c)
	fs.StringVar(&c.postgresURL, "postgres", os.Getenv("ACEMQ_POSTGRES_URL"), "PostgreSQL URL for the relay scenario (default $ACEMQ_POSTGRES_URL); without it the relay scenario is skipped")
	fs.IntVar(&c.relayN, "relay-n", 10000, "relay scenario: rows (and raw publishes) per run")
	fs.IntVar(&c.relayWriters, "relay-writers", 16, "relay scenario: goroutines writing one row per transaction")
	fs.Float64Var(&c.relayLoad, "relay-load", 0.5, "relay scenario: the paced part's rate, as a fraction of the round's relay msgs/s")
	fs.DurationVar(&c.relaySeconds, "relay-seconds", 2*time.Second, "relay scenario: how long the paced part (commit → confirm latency) is offered; 0 skips it")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.latencyLoads, err = parseLoads(*loads); err != nil {
		return c, err
	}
	if err := checkPartitionFlags(&c); err != nil {
		return c, err
	}
	if c.latencySeconds <= 0 || c.latencyCalibrate <= 0 || c.latencyRate < 0 {
		return c, fmt.Errorf("-latency-seconds and -latency-calibrate must be positive, -latency-rate not negative")
	}
	c.scenarios = splitList(*scen)
	c.systems = splitList(*sys)
	for _, s := range c.scenarios {
		if scenarioByName(s) == nil {
			return c, fmt.Errorf("unknown scenario %q (have %s)", s, strings.Join(scenarioNames(), ", "))
		}
	}
	for _, s := range c.systems {
		if !isSystem(s) {
			return c, fmt.Errorf("unknown system %q (have %s)", s, strings.Join(allSystems, ", "))
		}
	}
	if c.rounds < 1 || c.n < 1 || c.memoryN < 1 || c.retryN < 2 || c.window < 1 || c.channels < 1 ||
		c.publishers < 1 || c.prefetch < 1 || c.workers < 1 || c.bodySize < 16 ||
		c.relayN < 1 || c.relayWriters < 1 || c.relaySeconds < 0 || c.relayLoad <= 0 || c.relayLoad > 1.5 {
		return c, fmt.Errorf("counts must be positive (retry-n at least 2, body at least 16 bytes, relay-load in (0, 1.5], relay-seconds not negative)")
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run(args []string, stdout, stderr io.Writer) error {
	if ran, err := runSubcommand(args, stdout, stderr); ran {
		return err
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	if cfg.mutexProfile != "" {
		runtime.SetMutexProfileFraction(5)
	}
	progress := stderr
	if cfg.quiet {
		progress = io.Discard
	}
	if cfg.partitionCluster > 0 {
		stopCluster, err := startPartitionCluster(&cfg, cfg.partitionCluster, progress)
		if err != nil {
			return err
		}
		defer stopCluster()
	}
	results, err := runAll(ctx, cfg, progress)
	if err != nil {
		return err
	}
	for _, p := range []struct{ path, name string }{{cfg.memProfile, "allocs"}, {cfg.mutexProfile, "mutex"}} {
		if p.path != "" {
			if err := writeProfile(p.path, p.name); err != nil {
				return err
			}
		}
	}
	rows := summarize(cfg, results)
	if slices.Contains(cfg.systems, acemqSys) {
		rows = append(rows, chainRow(chainCost(jsonBody(cfg.bodySize))))
	}
	if cfg.json {
		return writeJSON(stdout, rows)
	}
	writeTable(stdout, cfg, rows)
	return nil
}

func writeProfile(path, name string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup(name).WriteTo(f, 0)
}
