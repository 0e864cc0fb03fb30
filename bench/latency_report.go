package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"
)

// The latency scenario's rows, over the rounds, and its table.

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
