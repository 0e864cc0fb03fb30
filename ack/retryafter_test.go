package ack_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/ack"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value string
		want  time.Duration // 0: no usable wait
	}{
		{"120", 120 * time.Second},
		{" \t120 ", 120 * time.Second},
		{"0120", 120 * time.Second},
		{"1", time.Second},
		{"86400", 24 * time.Hour}, // MaxRetryAfter itself
		{now.Add(time.Minute).Format(http.TimeFormat), time.Minute},
		{"Tuesday, 01-Dec-26 12:00:30 GMT", 30 * time.Second}, // RFC 850
		{"Tue Dec  1 12:00:45 2026", 45 * time.Second},        // asctime
		{now.Add(24 * time.Hour).Format(http.TimeFormat), 24 * time.Hour},

		// No usable wait: the ladder decides.
		{"", 0},
		{"   ", 0},
		{"0", 0},
		{"86401", 0},
		{"-5", 0},
		{"+5", 0},
		{"5.5", 0},
		{"1e3", 0},
		{"0x10", 0},
		{"12 0", 0},
		{"120, 60", 0},
		{"١٢٠", 0}, // digits, but not ASCII ones
		{"soon", 0},
		{"9223372036854775807", 0},           // the largest Duration in seconds would overflow
		{"18446744073709551615", 0},          // the largest uint64
		{"99999999999999999999999999999", 0}, // more than any integer type holds
		{strings.Repeat("9", 1<<20), 0},
		{now.Format(http.TimeFormat), 0}, // now: not in the future
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},        // in the past
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0},                    // long past
		{now.Add(25 * time.Hour).Format(http.TimeFormat), 0},    // over MaxRetryAfter
		{"Fri, 31 Dec 9999 23:59:59 GMT", 0},                    // far future
		{"Tue, 01 Dec 2026 12:01:00 PST", 0},                    // an HTTP-date is GMT only
		{"Tue, 32 Dec 2026 12:01:00 GMT", 0},                    // no such day
		{"Tue, 01 Dec 2026 12:01:00 GMT, 120", 0},               // two values in one
		{"Tue, 01 Dec 2026 12:01:00 GMT\r\nX-Evil: 1", 0},       // a header smuggled in
		{now.Add(time.Minute).Format(time.RFC3339), 0},          // a date, but not an HTTP-date
		{now.Add(time.Minute).Format(http.TimeFormat) + "x", 0}, // trailing garbage
	}
	for _, tt := range tests {
		d, ok := ack.ParseRetryAfter(tt.value, now)
		if ok != (tt.want != 0) || d != tt.want {
			t.Errorf("ParseRetryAfter(%.40q) = %v, %v; want %v", tt.value, d, ok, tt.want)
		}
	}
}

// TestParseRetryAfterDatesAsNetHTTP: the HTTP-dates ack reads without
// importing net/http are the ones http.ParseTime reads, to the second.
func TestParseRetryAfterDatesAsNetHTTP(t *testing.T) {
	t.Parallel()
	at := now.Add(90 * time.Minute)
	for _, value := range []string{
		at.Format(http.TimeFormat),
		at.Format(time.RFC850),
		at.Format(time.ANSIC),
		"Tue, 01 Dec 2026 13:30:00 GMT",
		"Tuesday, 01-Dec-26 13:30:00 GMT",
		"Tue Dec  1 13:30:00 2026",
		"Tue, 01 Dec 2026 13:30:00 UTC",
		"Tue, 1 Dec 2026 13:30:00 GMT",
		"tue, 01 dec 2026 13:30:00 gmt",
		"Tue, 01 Dec 2026 13:30 GMT",
	} {
		want, err := http.ParseTime(value)
		d, ok := ack.ParseRetryAfter(value, now)
		switch {
		case err != nil && ok:
			t.Errorf("%q: ack read %v, net/http refuses it: %v", value, d, err)
		case err == nil && !ok:
			t.Errorf("%q: net/http reads %v, ack refuses it", value, want)
		case err == nil && !now.Add(d).Equal(want):
			t.Errorf("%q: ack reads %v, net/http %v", value, now.Add(d), want)
		}
	}
}

func TestRetryAfterHeaderField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		h    map[string][]string
		want time.Duration // 0: no usable wait
	}{
		{"http.Header", http.Header{"Retry-After": {"30"}}, 30 * time.Second},
		{"absent", http.Header{"Content-Type": {"text/plain"}}, 0},
		{"nil", nil, 0},
		{"empty value", http.Header{"Retry-After": {""}}, 0},
		{"no values", http.Header{"Retry-After": {}}, 0},
		{"sent twice, the same", http.Header{"Retry-After": {"30", " 30"}}, 30 * time.Second},
		{"sent twice, differing", http.Header{"Retry-After": {"30", "3000"}}, 0},
		{"sent twice, one garbage", http.Header{"Retry-After": {"30", "soon"}}, 0},
		{"a hand-built map in lower case", map[string][]string{"retry-after": {"45"}}, 45 * time.Second},
		{"two spellings, differing", map[string][]string{"retry-after": {"45"}, "RETRY-AFTER": {"50"}}, 0},
		{"a date", http.Header{"Retry-After": {now.Add(2 * time.Minute).Format(http.TimeFormat)}}, 2 * time.Minute},
		{"a past date", http.Header{"Retry-After": {now.Add(-2 * time.Minute).Format(http.TimeFormat)}}, 0},
	}
	for _, tt := range tests {
		d, ok := ack.RetryAfterOf(tt.h, now)
		if ok != (tt.want != 0) || d != tt.want {
			t.Errorf("%s: %v, %v; want %v", tt.name, d, ok, tt.want)
		}
	}
}

// TestRetryAfterHeader: a usable Retry-After is the handler's chosen wait;
// anything else is a plain retry on the ladder. Either way the error is
// kept and an attempt is spent.
func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	limited := errors.New("partner API: 429 Too Many Requests")
	a := ack.RetryAfterHeader(http.Header{"Retry-After": {"120"}}, limited)
	if d, chosen := a.After(); a.Outcome() != ack.OutcomeRetry || !chosen || d != 2*time.Minute || a.Err() != limited {
		t.Errorf("Retry-After: 120 gave %v (after %v, chosen %v)", a, d, chosen)
	}
	// A date five minutes from the real now: within a second or two of it.
	a = ack.RetryAfterHeader(http.Header{"Retry-After": {time.Now().Add(5 * time.Minute).UTC().Format(http.TimeFormat)}}, limited)
	if d, chosen := a.After(); !chosen || d <= 3*time.Minute || d > 5*time.Minute {
		t.Errorf("Retry-After five minutes from now gave %v (after %v, chosen %v)", a, d, chosen)
	}
	for _, h := range []http.Header{nil, {"Retry-After": {"99999999999999999999"}}, {"Retry-After": {"-1"}}, {"Retry-After": {"1", "2"}}} {
		a := ack.RetryAfterHeader(h, limited)
		if _, chosen := a.After(); a.Outcome() != ack.OutcomeRetry || chosen || a.Err() != limited {
			t.Errorf("header %v gave %v; want a plain retry with the error", h, a)
		}
	}
	if a := ack.RetryAfterHeader(nil, nil); a.Outcome() != ack.OutcomeRetry || a.Err() == nil {
		t.Errorf("no error: %v; want a retry that still says something failed", a)
	}
}

// FuzzParseRetryAfter: any value, hostile or not, gives either no wait or
// one in (0, MaxRetryAfter], and a plain delta-seconds in range is read
// exactly.
func FuzzParseRetryAfter(f *testing.F) {
	for _, v := range []string{"120", "0", "-1", "86401", "Tue, 01 Dec 2026 12:01:00 GMT", "Tue Dec  1 12:00:45 2026", "1e3", "", "99999999999999999999"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, value string) {
		d, ok := ack.ParseRetryAfter(value, now)
		if ok != (d != 0) || d < 0 || d > ack.MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", value, d, ok)
		}
		if n, err := strconv.ParseUint(strings.Trim(value, " \t"), 10, 64); err == nil && n > 0 && n <= 86400 && !strings.ContainsAny(value, "+-_") {
			if !ok || d != time.Duration(n)*time.Second {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %ds", value, d, ok, n)
			}
		}
	})
}
