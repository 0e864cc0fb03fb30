package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"testing"
	"text/tabwriter"
	"time"
)

// targets are the issue's: acemq's msgs/s over each baseline's, in the
// same run.
var targets = map[string]map[string]float64{
	"publish": {rawSys: 0.9, watermillSys: 1.5},
	"consume": {rawSys: 0.85, watermillSys: 1.5},
	"memory":  {watermillSys: 3},
	"relay":   {rawSys: relayTarget},
}

// row is one scenario and system over every round: medians, and for acemq
// the ratios to the baselines.
type row struct {
	Scenario       string             `json:"scenario"`
	System         string             `json:"system"`
	MsgsPerS       float64            `json:"msgs_per_s"`
	PerRound       []float64          `json:"per_round_msgs_per_s"`
	Rounds         int                `json:"rounds"`
	N              int                `json:"n"`
	CPUPerMsgUs    float64            `json:"cpu_us_per_msg"`
	BrokerCPUUs    float64            `json:"broker_cpu_us_per_msg,omitempty"`
	AllocsPerMsg   float64            `json:"allocs_per_msg"`
	BytesPerMsg    float64            `json:"bytes_per_msg"`
	PeakHeapMiB    float64            `json:"peak_live_heap_mib"`
	NsPerMsg       float64            `json:"ns_per_msg,omitempty"`
	Ratios         map[string]float64 `json:"ratios,omitempty"` // "vs_amqp091": median of the per-round ratios
	PeakSlotsHeld  *int               `json:"peak_slots_held,omitempty"`
	HeldMsPerRetry *float64           `json:"held_ms_per_retry,omitempty"`
	Latency        *latencyRow        `json:"latency,omitempty"`    // latency scenario: one row per system and load
	Partitions     *partitionRow      `json:"partitions,omitempty"` // partitions scenario: one row per queue type and layout (partitions_report.go)
	Relay          *relayRow          `json:"relay,omitempty"`      // relay scenario, acemq's row (relay_report.go)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func summarize(cfg config, results []result) []row {
	var rows []row
	for _, sc := range scenarios {
		if !slices.Contains(cfg.scenarios, sc.name) {
			continue
		}
		if sc.name == "latency" {
			rows = append(rows, latencyRows(results)...)
			continue
		}
		if sc.name == "partitions" {
			rows = append(rows, partitionRows(cfg, results)...)
			continue
		}
		byRound := map[string]map[int]float64{} // system → round → msgs/s
		for _, sys := range allSystems {
			var rs []result
			for _, r := range results {
				if r.scenario == sc.name && r.system == sys {
					rs = append(rs, r)
				}
			}
			if len(rs) == 0 {
				continue
			}
			byRound[sys] = map[int]float64{}
			var rates, cpus, bcpus, allocs, bytes, heaps, holds []float64
			peakHeld := 0
			for _, r := range rs {
				rates = append(rates, r.msgsPerSec())
				cpus = append(cpus, micros(r.cpuPerMsg))
				bcpus = append(bcpus, micros(r.brokerCPUPerMsg))
				allocs = append(allocs, r.allocsPerMsg)
				bytes = append(bytes, r.bytesPerMsg)
				heaps = append(heaps, float64(r.peakHeap)/(1<<20))
				holds = append(holds, float64(r.heldPerRetry)/float64(time.Millisecond))
				peakHeld = max(peakHeld, r.peakHeld)
				byRound[sys][r.round] = r.msgsPerSec()
			}
			rw := row{
				Scenario: sc.name, System: sys, MsgsPerS: median(rates), PerRound: rates, Rounds: len(rs), N: rs[0].n,
				CPUPerMsgUs: median(cpus), BrokerCPUUs: median(bcpus), AllocsPerMsg: median(allocs), BytesPerMsg: median(bytes), PeakHeapMiB: median(heaps),
			}
			if sc.name == "retry" {
				h, ms := peakHeld, median(holds)
				rw.PeakSlotsHeld, rw.HeldMsPerRetry = &h, &ms
			}
			rows = append(rows, rw)
		}
		// acemq's ratios: the median over rounds of acemq's rate over the
		// baseline's in the same round. Raw amqp091-go's ratio to watermill
		// shows how far the broker, not the client, sets the pace.
		for i := range rows {
			if rows[i].Scenario != sc.name || rows[i].System == watermillSys {
				continue
			}
			for _, base := range []string{rawSys, watermillSys} {
				if base == rows[i].System {
					continue
				}
				var ratios []float64
				for round, a := range byRound[rows[i].System] {
					if b, ok := byRound[base][round]; ok && b > 0 {
						ratios = append(ratios, a/b)
					}
				}
				if len(ratios) > 0 {
					if rows[i].Ratios == nil {
						rows[i].Ratios = map[string]float64{}
					}
					rows[i].Ratios["vs_"+base] = median(ratios)
				}
			}
		}
	}
	return withRelayFigures(cfg, rows, results)
}

// chainRow reports the in-process cost of acemq's default chain.
func chainRow(r testing.BenchmarkResult) row {
	ns := float64(r.T.Nanoseconds()) / float64(r.N)
	return row{
		Scenario: "chain", System: acemqSys, MsgsPerS: 1e9 / ns, PerRound: []float64{1e9 / ns}, Rounds: 1, N: r.N,
		NsPerMsg: ns, AllocsPerMsg: float64(r.MemAllocs) / float64(r.N), BytesPerMsg: float64(r.MemBytes) / float64(r.N),
	}
}

func writeJSON(w io.Writer, rows []row) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func writeTable(w io.Writer, cfg config, rows []row) {
	if slices.ContainsFunc(rows, func(r row) bool { return r.Scenario != "chain" && r.Latency == nil && r.Partitions == nil }) {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "scenario\tsystem\tn\tmsgs/s (median)\tmin–max\tCPU µs/msg\tbroker CPU µs/msg\tallocs/msg\tB/msg\tpeak live heap MiB\t")
		for _, r := range rows {
			if r.Scenario == "chain" || r.Latency != nil || r.Partitions != nil {
				continue
			}
			broker := "-"
			if r.BrokerCPUUs > 0 {
				broker = fmt.Sprintf("%.0f", r.BrokerCPUUs)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f–%.0f\t%.1f\t%s\t%.1f\t%.0f\t%.1f\t\n", r.Scenario, r.System, r.N, r.MsgsPerS,
				slices.Min(r.PerRound), slices.Max(r.PerRound), r.CPUPerMsgUs, broker, r.AllocsPerMsg, r.BytesPerMsg, r.PeakHeapMiB)
		}
		tw.Flush()
	}
	writeLatencyTable(w, rows)
	writePartitionTable(w, cfg, rows)
	writeRelayTable(w, rows)
	if slices.ContainsFunc(rows, func(r row) bool { return r.System == acemqSys && len(r.Ratios) > 0 }) {

		fmt.Fprintf(w, "\nmsgs/s over a baseline's, the median of the %d same-round ratios:\n", cfg.rounds)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "scenario\tacemq/amqp091\tacemq/watermill\tamqp091/watermill\t")
		for _, r := range rows {
			if r.System != acemqSys || len(r.Ratios) == 0 {
				continue
			}
			rawVsWatermill := "-"
			for _, x := range rows {
				if x.Scenario == r.Scenario && x.System == rawSys {
					if v, ok := x.Ratios["vs_"+watermillSys]; ok {
						rawVsWatermill = fmt.Sprintf("%.2f×", v)
					}
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", r.Scenario, ratioCell(r, rawSys), ratioCell(r, watermillSys), rawVsWatermill)
		}
		tw.Flush()

	}

	for _, r := range rows {
		if r.Scenario == "chain" {
			fmt.Fprintf(w, "chain     acemq     mux + decode + max age + recover + accept-all handler, in process: %.0f ns/msg, %.1f allocs/msg, %.0f B/msg\n",
				r.NsPerMsg, r.AllocsPerMsg, r.BytesPerMsg)
		}
		if r.Scenario == "retry" && r.PeakSlotsHeld != nil {
			fmt.Fprintf(w, "retry %-9s consumer slots held while waiting: peak %d, %.1f ms per retried message\n",
				r.System, *r.PeakSlotsHeld, *r.HeldMsPerRetry)
		}
	}
}

func ratioCell(r row, base string) string {
	v, ok := r.Ratios["vs_"+base]
	if !ok {
		return "-"
	}
	t, ok := targets[r.Scenario][base]
	if !ok {
		return fmt.Sprintf("%.2f×", v)
	}
	verdict := "ok"
	if v < t {
		verdict = "MISSED"
	}
	return fmt.Sprintf("%.2f× (target ≥ %.2f: %s)", v, t, verdict)
}
