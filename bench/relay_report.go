package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
)

// relayTarget is the issue's: the relay's msgs/s at least this share of
// raw confirmed publishing's, in the same round.
const relayTarget = 0.8

// relayRow is what the relay scenario adds to acemq's row: the spread of
// its per-round ratio to raw amqp091-go, and the commit → confirm latency
// of the paced part.
type relayRow struct {
	VsRaw         *spread     `json:"vs_amqp091,omitempty"` // acemq msgs/s over raw's in the same round
	Target        float64     `json:"target"`
	TargetMet     *bool       `json:"target_met,omitempty"`
	Writers       int         `json:"writers"`
	PostgresCPUUs float64     `json:"postgres_cpu_us_per_msg,omitempty"` // every postgres process, the timed part
	Latency       *latencyRow `json:"commit_to_confirm,omitempty"`       // ms; load is of the round's own relay msgs/s
	// The halves alone, untimed by the meter: the writers with no relay
	// running, the relay draining what they left with no writers.
	WritersAlone *relayPartRow `json:"writers_alone,omitempty"`
	RelayAlone   *relayPartRow `json:"relay_alone,omitempty"`
	// The whole path with the table's NOTIFY trigger disabled, the relay
	// polling every 10 ms.
	WithoutNotify *relayPartRow `json:"without_notify,omitempty"`
	// The whole path with the trigger notifying on every commit, as before
	// the relay said when it is awake: the same run's before.
	AlwaysNotify *relayPartRow `json:"always_notify,omitempty"`
	// AwakeGain is the timed path's msgs/s over AlwaysNotify's, by round.
	AwakeGain *spread `json:"vs_always_notify,omitempty"`
	// AlwaysLatency is commit → confirm with the trigger notifying on
	// every commit, at the same offered rate as Latency.
	AlwaysLatency *latencyRow `json:"always_notify_commit_to_confirm,omitempty"`
}

// relayPartRow is one half of the path over the rounds.
type relayPartRow struct {
	MsgsPerS    spread  `json:"msgs_per_s"`
	VsRaw       *spread `json:"vs_amqp091,omitempty"` // over raw's msgs/s in the same round
	CPUPerMsgUs float64 `json:"cpu_us_per_msg"`
	PostgresUs  float64 `json:"postgres_cpu_us_per_msg,omitempty"`
	BrokerUs    float64 `json:"broker_cpu_us_per_msg,omitempty"`
}

// partRow summarizes one half over the rounds; raw is raw's msgs/s by
// round.
func partRow(parts map[int]relayPart, raw map[int]result) *relayPartRow {
	if len(parts) == 0 {
		return nil
	}
	var rates, ratios, cpu, pg, broker []float64
	for round, p := range parts {
		rates, cpu = append(rates, p.rate), append(cpu, micros(p.cpu))
		pg, broker = append(pg, micros(p.pgCPU)), append(broker, micros(p.brokerCPU))
		if b, ok := raw[round]; ok && b.msgsPerSec() > 0 {
			ratios = append(ratios, p.rate/b.msgsPerSec())
		}
	}
	r := &relayPartRow{MsgsPerS: spreadOf(rates), CPUPerMsgUs: median(cpu), PostgresUs: median(pg), BrokerUs: median(broker)}
	if len(ratios) > 0 {
		s := spreadOf(ratios)
		r.VsRaw = &s
	}
	return r
}

// relayNote is the progress line's tail for a relay run.
func relayNote(r result) string {
	f := r.relay
	if f == nil {
		return ""
	}
	return fmt.Sprintf("  PostgreSQL CPU µs/msg %.1f; writers alone %.0f msgs/s, relay alone %.0f msgs/s, without NOTIFY %.0f msgs/s, always NOTIFY %.0f msgs/s",
		micros(f.pgCPU), f.write.rate, f.drain.rate, f.polled.rate, f.always.rate)
}

// withRelayFigures fills acemq's relay row from the results: the ratio's
// spread and the latency figures.
func withRelayFigures(cfg config, rows []row, results []result) []row {
	byRound := map[string]map[int]result{}
	for _, r := range results {
		if r.scenario != "relay" {
			continue
		}
		if byRound[r.system] == nil {
			byRound[r.system] = map[int]result{}
		}
		byRound[r.system][r.round] = r
	}
	for i := range rows {
		if rows[i].Scenario != "relay" || rows[i].System != acemqSys {
			continue
		}
		rr := &relayRow{Target: relayTarget, Writers: cfg.relayWriters}
		var ratios []float64
		lr := &latencyRow{}
		var maxes, offered, p50, p99, p999, mx, pg []float64
		writes, drains, polls, always := map[int]relayPart{}, map[int]relayPart{}, map[int]relayPart{}, map[int]relayPart{}
		var gains []float64
		al := &latencyRow{}
		var ap50, ap99, ap999, amx, aoff []float64
		for _, round := range slices.Sorted(maps.Keys(byRound[acemqSys])) {
			a := byRound[acemqSys][round]
			if b, ok := byRound[rawSys][round]; ok && b.msgsPerSec() > 0 {
				ratios = append(ratios, a.msgsPerSec()/b.msgsPerSec())
			}
			if f := a.relay; f != nil {
				pg = append(pg, micros(f.pgCPU))
				if f.write.rate > 0 {
					writes[round] = f.write
				}
				if f.drain.rate > 0 {
					drains[round] = f.drain
				}
				if f.polled.rate > 0 {
					polls[round] = f.polled
				}
				if f.always.rate > 0 {
					always[round] = f.always
					gains = append(gains, a.msgsPerSec()/f.always.rate)
				}
				if l := f.alwaysLatency; l != nil {
					al.Load = l.load
					ap50, ap99, ap999, amx = append(ap50, ms(l.p50)), append(ap99, ms(l.p99)), append(ap999, ms(l.p999)), append(amx, ms(l.max))
					aoff = append(aoff, l.rate)
					al.N = append(al.N, l.n)
				}
			}
			for _, l := range a.latency {
				lr.Load = l.load
				maxes, offered = append(maxes, l.maxRate), append(offered, l.rate)
				p50, p99, p999, mx = append(p50, ms(l.p50)), append(p99, ms(l.p99)), append(p999, ms(l.p999)), append(mx, ms(l.max))
				lr.N = append(lr.N, l.n)
				lr.Dups += l.dups
			}
		}
		if len(ratios) > 0 {
			s := spreadOf(ratios)
			met := s.Median >= relayTarget
			rr.VsRaw, rr.TargetMet = &s, &met
		}
		if len(pg) > 0 {
			rr.PostgresCPUUs = median(pg)
		}
		rr.WritersAlone, rr.RelayAlone = partRow(writes, byRound[rawSys]), partRow(drains, byRound[rawSys])
		rr.WithoutNotify = partRow(polls, byRound[rawSys])
		rr.AlwaysNotify = partRow(always, byRound[rawSys])
		if len(gains) > 0 {
			g := spreadOf(gains)
			rr.AwakeGain = &g
		}
		if len(al.N) > 0 {
			al.Offered, al.P50, al.P99, al.P999, al.Max = spreadOf(aoff), spreadOf(ap50), spreadOf(ap99), spreadOf(ap999), spreadOf(amx)
			al.PerRoundP99 = ap99
			rr.AlwaysLatency = al
		}
		if len(lr.N) > 0 {
			lr.MaxMsgsPerS, lr.Offered = spreadOf(maxes), spreadOf(offered)
			lr.P50, lr.P99, lr.P999, lr.Max = spreadOf(p50), spreadOf(p99), spreadOf(p999), spreadOf(mx)
			lr.PerRoundP99 = p99
			rr.Latency = lr
		}
		rows[i].Relay = rr
	}
	return rows
}

// writeRelayTable prints the relay's ratio with its spread and its
// latency, when the relay scenario ran.
func writeRelayTable(w io.Writer, rows []row) {
	for _, r := range rows {
		if r.Scenario != "relay" || r.Relay == nil {
			continue
		}
		rr := r.Relay
		fmt.Fprintf(w, "\nrelay: %d writers, one row per transaction; the relay publishing with confirms and deleting, first insert to last row deleted\n", rr.Writers)
		if v := rr.VsRaw; v != nil {
			verdict := "ok"
			if !*rr.TargetMet {
				verdict = "MISSED"
			}
			fmt.Fprintf(w, "relay/amqp091 (raw confirmed publish) in the same round: %.2f× (%.2f–%.2f×) over %d rounds (target ≥ %.2f: %s)\n",
				v.Median, v.Min, v.Max, r.Rounds, rr.Target, verdict)
		}
		if rr.PostgresCPUUs > 0 {
			fmt.Fprintf(w, "PostgreSQL CPU (every postgres process on this machine) µs/msg: %.1f\n", rr.PostgresCPUUs)
		}
		for _, part := range []struct {
			name string
			p    *relayPartRow
		}{{"writers alone (no relay running)", rr.WritersAlone}, {"relay alone (draining what they left)", rr.RelayAlone},
			{"without NOTIFY (trigger off, 10 ms poll)", rr.WithoutNotify}, {"always NOTIFY (the trigger before)", rr.AlwaysNotify}} {
			if part.p == nil {
				continue
			}
			vs := ""
			if v := part.p.VsRaw; v != nil {
				vs = fmt.Sprintf(", %.2f× raw (%.2f–%.2f×)", v.Median, v.Min, v.Max)
			}
			fmt.Fprintf(w, "  %-40s %.0f msgs/s (%.0f–%.0f)%s; CPU µs/msg %.1f, PostgreSQL %.1f, broker %.1f\n", part.name,
				part.p.MsgsPerS.Median, part.p.MsgsPerS.Min, part.p.MsgsPerS.Max, vs, part.p.CPUPerMsgUs, part.p.PostgresUs, part.p.BrokerUs)
		}
		if g := rr.AwakeGain; g != nil {
			fmt.Fprintf(w, "relay over always NOTIFY in the same round: %.2f× (%.2f–%.2f×)\n", g.Median, g.Min, g.Max)
		}
		l := rr.Latency
		if l == nil {
			continue
		}
		cell := func(s spread) string { return fmt.Sprintf("%.2f (%.2f–%.2f)", s.Median, s.Min, s.Max) }
		fmt.Fprintf(w, "relay commit → publish confirmed, ms: the median over %d rounds (min–max); open loop at %.0f%% of the round's relay msgs/s, LISTEN/NOTIFY\n",
			len(l.N), l.Load*100)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "relay msgs/s\toffered msgs/s\tn\tp50\tp99\tp99.9\tmax\t")
		fmt.Fprintf(tw, "%.0f\t%.0f\t%d\t%s\t%s\t%s\t%s\t\n", l.MaxMsgsPerS.Median, l.Offered.Median, l.N[0],
			cell(l.P50), cell(l.P99), cell(l.P999), cell(l.Max))
		if a := rr.AlwaysLatency; a != nil {
			fmt.Fprintf(tw, "always NOTIFY\t%.0f\t%d\t%s\t%s\t%s\t%s\t\n", a.Offered.Median, a.N[0],
				cell(a.P50), cell(a.P99), cell(a.P999), cell(a.Max))
		}
		tw.Flush()
	}
}
