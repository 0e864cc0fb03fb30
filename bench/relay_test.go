package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"
)

// TestRelayScenario runs the relay scenario small, end to end on RabbitMQ
// and PostgreSQL, and reads its JSON: both systems' rows, the ratio and
// its spread, the halves alone and the commit → confirm latency. It skips
// only when a URL is missing and CI is unset: under CI (./scripts/test)
// a missing URL is a failure.
func TestRelayScenario(t *testing.T) {
	amqpURL, pgURL := os.Getenv("ACEMQ_AMQP_URL"), os.Getenv("ACEMQ_POSTGRES_URL")
	if amqpURL == "" || pgURL == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but ACEMQ_AMQP_URL or ACEMQ_POSTGRES_URL is not: the relay test may not skip (run ./scripts/test)")
		}
		t.Skip("no $ACEMQ_AMQP_URL or $ACEMQ_POSTGRES_URL")
	}
	var out bytes.Buffer
	args := []string{"-amqp", amqpURL, "-postgres", pgURL, "-scenarios", "relay", "-systems", "acemq,amqp091",
		"-relay-n", "200", "-relay-seconds", "300ms", "-rounds", "1", "-json", "-q", "-broker-pid", "-1"}
	if err := run(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	rows := map[string]row{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		rows[r.Scenario+"/"+r.System] = r
	}
	raw, ok := rows["relay/amqp091"]
	if !ok || raw.MsgsPerS <= 0 || raw.N != 200 {
		t.Errorf("relay/amqp091: %+v (present %v)", raw, ok)
	}
	a, ok := rows["relay/acemq"]
	if !ok || a.MsgsPerS <= 0 || a.N != 200 || a.Relay == nil {
		t.Fatalf("relay/acemq: %+v (present %v) in %s", a, ok, out.String())
	}
	rr := a.Relay
	if rr.VsRaw == nil || rr.VsRaw.Median <= 0 || a.Ratios["vs_amqp091"] != rr.VsRaw.Median {
		t.Errorf("ratio: %+v, ratios %v", rr.VsRaw, a.Ratios)
	}
	for name, p := range map[string]*relayPartRow{"writers alone": rr.WritersAlone, "relay alone": rr.RelayAlone, "without NOTIFY": rr.WithoutNotify, "always NOTIFY": rr.AlwaysNotify} {
		if p == nil || p.MsgsPerS.Median <= 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if g := rr.AwakeGain; g == nil || g.Median <= 0 {
		t.Errorf("relay over always NOTIFY: %+v", g)
	}
	if a := rr.AlwaysLatency; a == nil || len(a.N) != 1 || a.N[0] < 1 || a.P50.Median <= 0 {
		t.Errorf("commit → confirm latency, always NOTIFY: %+v", a)
	}
	l := rr.Latency
	if l == nil || len(l.N) != 1 || l.N[0] < 1 || l.P50.Median <= 0 || l.P99.Median < l.P50.Median || l.Dups != 0 {
		t.Errorf("commit → confirm latency: %+v", l)
	}
}

// TestRelaySkipped: without a PostgreSQL URL the scenario says it is
// skipped, and runs nothing.
func TestRelaySkipped(t *testing.T) {
	var out, progress bytes.Buffer
	if err := run([]string{"-amqp", "", "-postgres", "", "-scenarios", "relay,memory", "-memory-n", "50", "-rounds", "1", "-json"}, &out, &progress); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(progress.Bytes(), []byte("relay: skipped: no PostgreSQL URL")) {
		t.Errorf("no skip line in %q", progress.String())
	}
	if bytes.Contains(out.Bytes(), []byte(`"scenario":"relay"`)) {
		t.Errorf("a relay row without PostgreSQL: %s", out.String())
	}
}
