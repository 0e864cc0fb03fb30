package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMemoryScenario runs the memory scenario end to end with a few
// messages, as `go run .` would without a broker, and reads its JSON.
func TestMemoryScenario(t *testing.T) {
	var out bytes.Buffer
	args := []string{"-amqp", "", "-scenarios", "memory", "-memory-n", "300", "-rounds", "2", "-json", "-q"}
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
	for _, key := range []string{"memory/acemq", "memory/watermill"} {
		r, ok := rows[key]
		switch {
		case !ok:
			t.Errorf("no row for %s in %s", key, out.String())
		case r.MsgsPerS <= 0 || r.Rounds != 2 || r.N != 300:
			t.Errorf("%s: %+v", key, r)
		}
	}
	if _, ok := rows["memory/acemq"].Ratios["vs_watermill"]; !ok {
		t.Errorf("acemq has no ratio to watermill: %+v", rows["memory/acemq"])
	}
	if r := rows["chain/acemq"]; r.NsPerMsg <= 0 {
		t.Errorf("chain: %+v", r)
	}
}

// TestFlags refuses what would make a meaningless run.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scenarios", "nope"},
		{"-systems", "kafka"},
		{"-rounds", "0"},
		{"-retry-n", "1"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestJSONBody(t *testing.T) {
	for _, size := range []int{64, 256, 1024} {
		b := jsonBody(size)
		if len(b) != size || !json.Valid(b) {
			t.Errorf("jsonBody(%d): %d bytes, valid %v", size, len(b), json.Valid(b))
		}
	}
}
