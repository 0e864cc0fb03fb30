package main

import (
	neturl "net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// relayFigures are what a relay run measures besides the meter's figures.
type relayFigures struct {
	pgCPU time.Duration // PostgreSQL's CPU per row over the timed part; 0 when unknown
	write relayPart     // the writers alone, no relay running
	drain relayPart     // the relay alone, from a table holding the n rows the writers left
	// polled is the whole path with the NOTIFY trigger disabled and a
	// relay polling every relayPoll.
	polled relayPart
	// always is the whole path with the trigger notifying on every commit,
	// as before the relay held its awake lock (outbox/awake.go).
	always relayPart
	// alwaysLatency is commit → confirm on that path, at the timed part's
	// offered rate; nil when the latency part is off.
	alwaysLatency *loadLatency
}

// relayPart is one half of the path run alone.
type relayPart struct {
	rate                  float64       // rows a second
	cpu, pgCPU, brokerCPU time.Duration // per row: this process, PostgreSQL, the broker; 0 when unknown
}

// cpuMark is a moment's clock and CPU times, to measure a part from.
type cpuMark struct {
	at               time.Time
	self, pg, broker time.Duration
	pgOK, brokerOK   bool
	postgresURL      string
	brokerPID        int
}

func markCPU(postgresURL string, brokerPID int) cpuMark {
	c := cpuMark{postgresURL: postgresURL, brokerPID: brokerPID, self: processCPU()}
	c.pg, c.pgOK = postgresCPU(postgresURL)
	c.broker, c.brokerOK = processCPUOf(brokerPID)
	c.at = time.Now()
	return c
}

// since is the part from c to now, over n rows.
func (c cpuMark) since(n int) relayPart {
	elapsed := time.Since(c.at)
	p := relayPart{rate: float64(n) / elapsed.Seconds(), cpu: (processCPU() - c.self) / time.Duration(n)}
	if pg, ok := postgresCPU(c.postgresURL); ok && c.pgOK {
		p.pgCPU = (pg - c.pg) / time.Duration(n)
	}
	if b, ok := processCPUOf(c.brokerPID); ok && c.brokerOK {
		p.brokerCPU = (b - c.broker) / time.Duration(n)
	}
	return p
}

// postgresCPU is the CPU time of every PostgreSQL process on this machine
// (the server, its backends, its WAL writer and checkpointer) when the URL
// names this machine; ok is false otherwise. It counts what other clients
// of the server cost too, so on a shared server it is an upper bound.
// The run's connections stay open from before it starts to after it
// ends, so their backends' time is all counted.
func postgresCPU(postgresURL string) (time.Duration, bool) {
	u, err := neturl.Parse(postgresURL)
	if err != nil {
		return 0, false
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1", "":
	default:
		return 0, false
	}
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	var total time.Duration
	found := false
	for _, f := range comms {
		b, err := os.ReadFile(f)
		if err != nil || strings.TrimSpace(string(b)) != "postgres" {
			continue
		}
		pid, err := strconv.Atoi(strings.Split(f, "/")[2])
		if err != nil {
			continue
		}
		if t, ok := processCPUOf(pid); ok {
			total, found = total+t, true
		}
	}
	return total, found
}
