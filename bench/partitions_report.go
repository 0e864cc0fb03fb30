package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// partitionTarget is the issue's: four partitions on one node carry at
// least this many times one queue's msgs/s, in the same round.
const partitionTarget = 1.6

// partitionRow is what the partitions scenario adds to its rows, one per
// queue type and layout: the spread of its per-round ratio to one plain
// queue of the same type, and where its messages and leaders were.
type partitionRow struct {
	QueueType       string     `json:"queue_type"`
	Layout          string     `json:"layout"`     // "queue", "p1", "p2", "p4"
	Partitions      int        `json:"partitions"` // 0: one plain queue
	Nodes           int        `json:"nodes"`
	Publishers      int        `json:"publishers"` // transports, each with -publishers goroutines
	MsgsPerS        spread     `json:"msgs_per_s"`
	PublishMsgsPerS spread     `json:"publish_msgs_per_s"` // first publish to the last confirm
	VsQueue         *spread    `json:"vs_queue,omitempty"` // msgs/s over the plain queue's in the same round
	PerRoundVsQueue []float64  `json:"per_round_vs_queue,omitempty"`
	Target          *float64   `json:"target,omitempty"` // four partitions on one node
	TargetMet       *bool      `json:"target_met,omitempty"`
	PerQueue        [][]int    `json:"per_round_per_queue"`         // messages handled per partition, each round
	Leaders         [][]string `json:"per_round_leaders,omitempty"` // each partition's leader node, each round
}

// partitionRows makes one row per queue type and layout from the rounds'
// runs.
func partitionRows(cfg config, results []result) []row {
	type key struct {
		queueType string
		count     int
	}
	byKey := map[key]map[int]partitionRun{} // → round → run
	for _, r := range results {
		if r.scenario != "partitions" {
			continue
		}
		for _, p := range r.partitions {
			k := key{p.queueType, p.count}
			if byKey[k] == nil {
				byKey[k] = map[int]partitionRun{}
			}
			byKey[k][r.round] = p
		}
	}
	nodes := len(partitionURLs(cfg))
	var rows []row
	for _, l := range partitionLayouts(cfg) {
		runs := byKey[key{l.queueType, l.count}]
		if len(runs) == 0 {
			continue
		}
		base := byKey[key{l.queueType, 0}]
		pr := &partitionRow{QueueType: l.queueType, Layout: variantName(l.count), Partitions: l.count, Nodes: nodes, Publishers: cfg.partitionPublishers}
		var rates, pubRates, cpus, bcpus, allocs, bytes, ratios []float64
		n := 0
		for _, round := range slices.Sorted(maps.Keys(runs)) {
			p := runs[round]
			n = p.n
			rates = append(rates, p.rate())
			pubRates = append(pubRates, float64(p.n)/p.publishElapsed.Seconds())
			cpus = append(cpus, micros(p.cpu/time.Duration(p.n)))
			bcpus = append(bcpus, micros(p.brokerCPU/time.Duration(p.n)))
			allocs = append(allocs, float64(p.mallocs)/float64(p.n))
			bytes = append(bytes, float64(p.bytes)/float64(p.n))
			pr.PerQueue = append(pr.PerQueue, p.perQueue)
			if len(p.leaders) > 0 {
				pr.Leaders = append(pr.Leaders, p.leaders)
			}
			if b, ok := base[round]; ok && l.count > 0 && b.rate() > 0 {
				ratios = append(ratios, p.rate()/b.rate())
			}
		}
		pr.MsgsPerS, pr.PublishMsgsPerS = spreadOf(rates), spreadOf(pubRates)
		if len(ratios) > 0 {
			s := spreadOf(ratios)
			pr.VsQueue, pr.PerRoundVsQueue = &s, ratios
			if l.count == 4 && nodes == 1 {
				t, met := partitionTarget, s.Median >= partitionTarget
				pr.Target, pr.TargetMet = &t, &met
			}
		}
		rows = append(rows, row{
			Scenario: "partitions", System: acemqSys, MsgsPerS: median(rates), PerRound: rates, Rounds: len(rates), N: n,
			CPUPerMsgUs: median(cpus), BrokerCPUUs: median(bcpus), AllocsPerMsg: median(allocs), BytesPerMsg: median(bytes),
			Partitions: pr,
		})
	}
	return rows
}

// writePartitionTable prints the partitions scenario's rows, when it ran.
func writePartitionTable(w io.Writer, cfg config, rows []row) {
	if !slices.ContainsFunc(rows, func(r row) bool { return r.Partitions != nil }) {
		return
	}
	nodes := len(partitionURLs(cfg))
	fmt.Fprintf(w, "\npartitions: end to end, n messages with %d keys published to Partitioned.For(key) while %d Server(s) accept them; %d node(s); %d publishers × %d goroutines, %d awaiting a confirm on %d channels each\n",
		partitionKeys, nodes, nodes, cfg.partitionPublishers, cfg.publishers, cfg.window, cfg.channels)
	fmt.Fprintf(w, "msgs/s: the median over %d rounds (min–max); vs queue: msgs/s over one plain queue's of the same type in the same round, the median of the rounds (min–max)\n", cfg.rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "type\tlayout\tn\tmsgs/s\tmin–max\tpublish msgs/s\tCPU µs/msg\tbroker CPU µs/msg\tvs queue\tper queue (last round)\t")
	for _, r := range rows {
		p := r.Partitions
		if p == nil {
			continue
		}
		broker := "-"
		if r.BrokerCPUUs > 0 {
			broker = fmt.Sprintf("%.0f", r.BrokerCPUUs)
		}
		vs := "-"
		if p.VsQueue != nil {
			vs = fmt.Sprintf("%.2f× (%.2f–%.2f×)", p.VsQueue.Median, p.VsQueue.Min, p.VsQueue.Max)
			if p.Target != nil {
				verdict := "ok"
				if !*p.TargetMet {
					verdict = "MISSED"
				}
				vs += fmt.Sprintf(" (target ≥ %.2f: %s)", *p.Target, verdict)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f–%.0f\t%.0f\t%.1f\t%s\t%s\t%v\t\n", p.QueueType, p.Layout, r.N, p.MsgsPerS.Median, p.MsgsPerS.Min, p.MsgsPerS.Max,
			p.PublishMsgsPerS.Median, r.CPUPerMsgUs, broker, vs, p.PerQueue[len(p.PerQueue)-1])
	}
	tw.Flush()
	for _, r := range rows {
		if p := r.Partitions; p != nil && len(p.Leaders) > 0 && p.Partitions > 1 {
			var rounds []string
			for _, ls := range p.Leaders {
				rounds = append(rounds, strings.Join(ls, " "))
			}
			fmt.Fprintf(w, "leaders %s %s, partition by partition, each round: %s\n", p.QueueType, p.Layout, strings.Join(rounds, " | "))
		}
	}
}
