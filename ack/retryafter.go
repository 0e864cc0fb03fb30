package ack

import (
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter is the longest Retry-After that [RetryAfterHeader] and
// [ParseRetryAfter] take as given: a day. A longer one is far more often a
// mistake (milliseconds sent as seconds, a date a year off) or a hostile
// server than a plan, and a message made to wait it would sit out of
// sight; the retry ladder is used instead.
const MaxRetryAfter = 24 * time.Hour

// httpDateLayouts are the three forms of an HTTP-date (RFC 9110 §5.6.7),
// the layouts net/http's ParseTime tries, in its order: IMF-fixdate (that
// is http.TimeFormat), then the obsolete RFC 850 and asctime forms.
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",
	time.RFC850,
	time.ANSIC,
}

// ParseRetryAfter reads a Retry-After field value (RFC 9110 §10.2.3):
// delta-seconds ("120") or an HTTP-date ("Wed, 21 Oct 2026 07:28:00 GMT"),
// taken relative to now. It reports false for what gives no usable wait: an
// empty or unparsable value, a sign, a fraction, a number too large to
// hold, a wait of zero or a date not after now, and a wait over
// [MaxRetryAfter].
//
// It parses the date with net/http's own layouts rather than importing
// net/http, so that ack stays a leaf a handler package can import for
// nothing more than its outcomes.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.Trim(value, " \t") // optional whitespace around a field value
	if value == "" {
		return 0, false
	}
	if isDigits(value) {
		secs, err := strconv.ParseUint(value, 10, 64)
		if err != nil || secs == 0 || secs > uint64(MaxRetryAfter/time.Second) {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	for _, layout := range httpDateLayouts {
		t, err := time.Parse(layout, value)
		if err != nil {
			continue
		}
		d := t.Sub(now)
		if d <= 0 || d > MaxRetryAfter {
			return 0, false
		}
		return d, true
	}
	return 0, false
}

// RetryAfterHeader answers a failed call whose response carried a
// Retry-After (a 429 or a 503, typically): [RetryAfter] with the wait it
// asks for, or, when it gives none ParseRetryAfter accepts, a plain
// [Retry] that leaves the wait to the queue's ladder. h is the response's
// header, an http.Header as it is (resp.Header); the field is looked up by
// its canonical name, Retry-After, and, for a map built by hand, in any
// case. A field sent more than once with different values is ambiguous
// and falls back to the ladder too. err is what went wrong, as for Retry.
func RetryAfterHeader(h map[string][]string, err error) Ack {
	if d, ok := retryAfterOf(h, time.Now()); ok {
		return RetryAfter(d, err)
	}
	return Retry(err)
}

// retryAfterOf finds the Retry-After field of h and parses it.
func retryAfterOf(h map[string][]string, now time.Time) (time.Duration, bool) {
	values, ok := h["Retry-After"]
	if !ok {
		for k, v := range h {
			if strings.EqualFold(k, "Retry-After") {
				values = append(values, v...)
			}
		}
	}
	var value string
	for i, v := range values {
		v = strings.Trim(v, " \t")
		if i > 0 && v != value {
			return 0, false
		}
		value = v
	}
	return ParseRetryAfter(value, now)
}

// isDigits says whether s is all ASCII digits: delta-seconds is 1*DIGIT,
// so "+5", "-5", "5.0" and "1e3" are not waits, though strconv would read
// some of them.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
