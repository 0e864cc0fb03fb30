package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/retry"
)

// Fuzz targets for what a producer controls: the envelope's headers, the
// body through the JSON codec, and the delays that name rung queues. Their
// seed corpora are in testdata/fuzz; go test runs them as tests, and
// go test -fuzz=FuzzEnvelope ./test/faults/ explores further.

// headerValue turns a fuzzed kind and its inputs into a header value of one
// of the types a transport hands over.
func headerValue(kind uint8, s string, n int64, f float64) any {
	switch kind % 9 {
	case 0:
		return nil
	case 1:
		return s
	case 2:
		return []byte(s)
	case 3:
		return n
	case 4:
		return int32(n)
	case 5:
		return f
	case 6:
		return map[string]any{s: n}
	case 7:
		return []any{s, n, f}
	default:
		return time.UnixMilli(n)
	}
}

func FuzzEnvelope(f *testing.F) {
	f.Add("order-1", uint8(1), "1", int64(1), 1.0, uint8(3), "", int64(1700000000000), 0.0, []byte(`{}`))
	f.Add("", uint8(5), "", int64(0), 2.5, uint8(1), "2024-01-01T00:00:00Z", int64(0), 0.0, []byte(nil))
	f.Add("id-\xff\xfe", uint8(3), "", int64(1)<<40, math.NaN(), uint8(3), "", int64(-1), 0.0, []byte("not json"))
	f.Add("x", uint8(1), " 7 ", int64(-5), math.Inf(1), uint8(5), "yesterday", int64(math.MaxInt64), 1e300, []byte(`[1]`))
	f.Add("x", uint8(6), "n", int64(2), -1.0, uint8(8), "", int64(math.MinInt64), 0.0, []byte(`{"n":"seven"}`))
	f.Fuzz(func(t *testing.T, id string, attemptKind uint8, attemptS string, attemptN int64, attemptF float64,
		createdKind uint8, createdS string, createdN int64, createdF float64, body []byte) {
		headers := map[string]any{
			acemq.HeaderID:      id,
			acemq.HeaderAttempt: headerValue(attemptKind, attemptS, attemptN, attemptF),
			acemq.HeaderCreated: headerValue(createdKind, createdS, createdN, createdF),
			acemq.HeaderError:   attemptS,
			"x-delivery-count":  headerValue(attemptKind+1, attemptS, attemptN, attemptF),
		}
		m := acemq.NewMessage("q", body, headers)
		env := m.Envelope()
		if env.Attempt < 1 {
			t.Errorf("attempt %d from %#v", env.Attempt, headers[acemq.HeaderAttempt])
		}
		if env.ID == "" {
			t.Error("empty id")
		}
		if id != "" && env.ID != id {
			t.Errorf("id %q, want the header's %q", env.ID, id)
		}
		if m.Age() < 0 {
			t.Errorf("negative age %s", m.Age())
		}
		if env.DeliveryCount < 0 {
			t.Errorf("delivery count %d", env.DeliveryCount)
		}
		// The decode middleware settles every body one way or the other.
		a := middleware.Decode(codec.JSON)(acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
			return ack.Accept()
		})).ServeMessage(context.Background(), m)
		switch {
		case json.Valid(body) && a.Outcome() != ack.OutcomeAccept:
			t.Errorf("valid JSON %q: %v", body, a)
		case !json.Valid(body) && (a.Outcome() != ack.OutcomePark || !strings.HasPrefix(a.Reason(), "could not be decoded: ")):
			t.Errorf("invalid JSON %q: %v", body, a)
		}
	})
}

func FuzzJSONCodec(f *testing.F) {
	for _, s := range []string{``, `{}`, `null`, `{"n":1}`, `{"n":"x"}`, `[`, "\xff", `{"a":` + strings.Repeat("[", 1000), `1e999`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		valid := json.Valid(data)
		v, ok := codec.JSON.(codec.Validator)
		if !ok {
			t.Fatal("the JSON codec is no Validator")
		}
		if err := v.Validate(data); (err == nil) != valid {
			t.Errorf("Validate(%q) = %v, json.Valid %v", data, err, valid)
		} else if err != nil && (!ack.IsFatal(err) || !errors.Is(err, codec.ErrNotJSON)) {
			t.Errorf("Validate(%q) = %v: not fatal, or not ErrNotJSON", data, err)
		}
		var anyV any
		err := codec.JSON.Unmarshal(data, &anyV)
		// Valid JSON may still not decode (1e999 overflows a float64); what
		// is not valid never decodes.
		if err == nil && !valid {
			t.Errorf("Unmarshal(%q) accepted what json.Valid refuses", data)
		}
		if err != nil && !ack.IsFatal(err) {
			t.Errorf("Unmarshal error %v is not fatal: it would be retried", err)
		}
		var typed struct {
			N int `json:"n"`
		}
		if err := codec.JSON.Unmarshal(data, &typed); err != nil && !ack.IsFatal(err) {
			t.Errorf("typed Unmarshal error %v is not fatal", err)
		}
		if err == nil {
			out, err := codec.JSON.Marshal(anyV)
			if err != nil {
				t.Errorf("Marshal of what Unmarshal gave: %v", err)
			} else if !json.Valid(out) {
				t.Errorf("Marshal wrote invalid JSON %q", out)
			}
		}
	})
}

func FuzzRungName(f *testing.F) {
	for _, d := range []time.Duration{0, time.Nanosecond, time.Millisecond, 250 * time.Millisecond, 40 * time.Second,
		5 * time.Minute, 90 * time.Minute, 1500 * time.Millisecond, 25 * time.Hour, -time.Second, math.MaxInt64} {
		f.Add(int64(d), "shipping.orders", uint8(5), int64(time.Second), int64(time.Minute))
	}
	f.Add(int64(time.Second), "q\xff", uint8(0), int64(-1), int64(0))
	f.Fuzz(func(t *testing.T, delay int64, queue string, attempts uint8, initial, maxDelay int64) {
		d := time.Duration(delay)
		s := retry.FormatDelay(d)
		if d < time.Millisecond {
			if s != "0s" {
				t.Errorf("FormatDelay(%v) = %q, want 0s", d, s)
			}
		} else {
			back, err := time.ParseDuration(s)
			if err != nil || back != d.Truncate(time.Millisecond) {
				t.Errorf("FormatDelay(%v) = %q, which reads back as %v, %v", d, s, back, err)
			}
		}
		if strings.ContainsAny(s, " .") || !utf8.ValidString(s) {
			t.Errorf("FormatDelay(%v) = %q", d, s)
		}
		if got, want := retry.RungName(queue, d), queue+".retry."+s; got != want {
			t.Errorf("RungName = %q, want %q", got, want)
		}
		args := retry.RungArgs(queue, d)
		if len(args) != 3 || args["x-message-ttl"] != d.Milliseconds() ||
			args["x-dead-letter-exchange"] != retry.Exchange || args["x-dead-letter-routing-key"] != queue {
			t.Errorf("RungArgs = %v", args)
		}

		p := retry.Exponential(int(attempts%20), time.Duration(initial), time.Duration(maxDelay)).WithBrokerWaitThreshold(time.Second)
		rungs := p.BrokerRungs()
		if !slices.IsSorted(rungs) || len(slices.Compact(slices.Clone(rungs))) != len(rungs) {
			t.Errorf("BrokerRungs %v: not sorted and distinct", rungs)
		}
		names := map[string]time.Duration{}
		for _, r := range rungs {
			if r < time.Second {
				t.Errorf("rung %v below the threshold", r)
			}
			n := retry.RungName(queue, r)
			if other, ok := names[n]; ok {
				t.Errorf("rungs %v and %v share the name %s", other, r, n)
			}
			names[n] = r
		}
		for attempt := 1; attempt <= p.MaxAttempts()+1; attempt++ {
			w, ok := p.NextWait(attempt, 0)
			if ok != (attempt < p.MaxAttempts()) {
				t.Errorf("NextWait(%d) ok=%v with %d attempts", attempt, ok, p.MaxAttempts())
			}
			if ok && (w.Delay < 0 || (w.Where == retry.OnRung && !slices.Contains(rungs, w.Delay))) {
				t.Errorf("NextWait(%d) = %+v, rungs %v", attempt, w, rungs)
			}
		}
	})
}
