// Package wiretest reads docs/wire-contract.md, the document the other
// AceMQ libraries are written from, so that tests hold what this module
// puts on the wire to that document and not to a copy of it that could
// drift: a header added, renamed or written in another type fails them
// until the document says so too.
package wiretest

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/wire"
)

// Doc is what the document specifies, as far as the tests check it.
type Doc struct {
	// Headers maps each header of the "Headers" table to the Go type its
	// "type written" column starts with ("string", "int64").
	Headers map[string]string
	// Optional are the headers the table says are only on some messages
	// ("only on dead letters and parked messages"); the others are on
	// every message the library publishes.
	Optional map[string]bool
	// BrokerOwned are the headers a copy drops, as "Copies the library
	// publishes" lists them; a name ending in * is a prefix.
	BrokerOwned []string
	// BrokerProperties are the AMQP properties a copy drops, by their AMQP
	// names ("expiration", "user_id").
	BrokerProperties []string
	// Reasons match the documented x-acemq-error values, N, <duration>,
	// <err>, <queue> and <reason> standing for any text, and <count> for
	// ", N times" or nothing.
	Reasons []*regexp.Regexp
}

// amqpProperties are AMQP 0-9-1's basic properties, which tell a property
// from a header in the document's list of what the broker owns.
var amqpProperties = []string{"content_type", "content_encoding", "delivery_mode", "priority", "correlation_id",
	"reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id"}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	typeWord   = regexp.MustCompile(`^[a-z][a-z0-9]*`)
)

// Documented parses the wire contract at path. It fails rather than
// return a Doc with a part missing, so that a document reworded out of
// the parser's reach cannot pass every test by checking nothing.
func Documented(path string) (Doc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Doc{}, err
	}
	doc := Doc{Headers: map[string]string{}, Optional: map[string]bool{}}
	lines := strings.Split(string(b), "\n")
	for _, l := range section(lines, "## Headers") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		if !strings.HasPrefix(strings.TrimSpace(l), "|") || len(cells) < 3 || !strings.Contains(cells[0], "`") {
			continue // prose, the heading row, the |---| row
		}
		typ := typeWord.FindString(strings.TrimSpace(cells[1]))
		if typ == "" {
			return Doc{}, fmt.Errorf("%s: no type in the headers table row %q", path, l)
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			doc.Headers[m[1]] = typ
			if strings.Contains(cells[2], "only on") {
				doc.Optional[m[1]] = true
			}
		}
	}
	copies := strings.Join(section(lines, "## Copies the library publishes"), " ")
	if _, owned, ok := strings.Cut(copies, "the broker owns:"); ok {
		owned, _, _ = strings.Cut(owned, ". ")
		for _, m := range backticked.FindAllStringSubmatch(owned, -1) {
			if slices.Contains(amqpProperties, m[1]) {
				doc.BrokerProperties = append(doc.BrokerProperties, m[1])
			} else {
				doc.BrokerOwned = append(doc.BrokerOwned, m[1])
			}
		}
	}
	doc.Reasons, err = reasons(lines)
	switch {
	case err != nil:
		return Doc{}, fmt.Errorf("%s: %w", path, err)
	case len(doc.Headers) == 0:
		return Doc{}, fmt.Errorf("%s: no headers table under \"## Headers\"", path)
	case len(doc.BrokerOwned) == 0 || len(doc.BrokerProperties) == 0:
		return Doc{}, fmt.Errorf("%s: no list of what the broker owns under \"## Copies the library publishes\"", path)
	}
	return doc, nil
}

// Load is Documented for a test, which it fails on an error.
func Load(tb testing.TB, path string) Doc {
	tb.Helper()
	doc, err := Documented(path)
	if err != nil {
		tb.Fatal(err)
	}
	return doc
}

// section returns the lines under heading, up to the next heading of its
// level or above.
func section(lines []string, heading string) []string {
	for i, l := range lines {
		if strings.TrimSpace(l) != heading {
			continue
		}
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], "# ") || strings.HasPrefix(lines[j], "## ") {
				return lines[i+1 : j]
			}
		}
		return lines[i+1:]
	}
	return nil
}

// reasons reads the fenced block that follows the line introducing the
// reasons.
func reasons(lines []string) ([]*regexp.Regexp, error) {
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "Reasons (`x-acemq-error`)") })
	for i >= 0 && i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "" {
		i++
	}
	if i < 0 || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
		return nil, errors.New("no block of reasons after \"Reasons (`x-acemq-error`)\"")
	}
	var out []*regexp.Regexp
	for _, l := range lines[i+2:] {
		if strings.HasPrefix(l, "```") {
			return out, nil
		}
		p := regexp.QuoteMeta(strings.TrimSpace(l))
		p = strings.NewReplacer(" N ", ` \d+ `, "<duration>", `\S+`, "<err>", `.*`,
			"<queue>", `.+`, "<reason>", `.+`, "<count>", `(?:, \d+ times)?`).Replace(p)
		out = append(out, regexp.MustCompile("^"+p+"$"))
	}
	return nil, errors.New("the block of reasons does not end")
}

// IsBrokerOwned reports whether the document lists key among the headers
// a copy drops.
func (d Doc) IsBrokerOwned(key string) bool {
	for _, o := range d.BrokerOwned {
		if p, ok := strings.CutSuffix(o, "*"); ok && strings.HasPrefix(key, p) || key == o {
			return true
		}
	}
	return false
}

// Want is what the document says one message must carry: the values of
// the headers on every message, and whether it was given up on.
type Want struct {
	ID                   string
	Attempt              int64
	Created              int64 // Unix milliseconds
	Exchange, RoutingKey string
	// GivenUp says x-acemq-error is there, with a documented reason; when
	// false it must be absent.
	GivenUp bool
}

// Check returns what is wrong with the x-acemq-* headers h (as a consumer
// received them) by the document: a header the table does not name, one
// written in another type, one of the table's missing, a value other than
// w's.
func (d Doc) Check(h map[string]any, w Want) error {
	var errs []error
	for k, v := range h {
		if !strings.HasPrefix(k, "x-acemq-") {
			continue
		}
		typ, ok := d.Headers[k]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s = %#v is not in the document's headers table", k, v))
		case fmt.Sprintf("%T", v) != typ:
			errs = append(errs, fmt.Errorf("%s = %#v is a %T; the document says %s", k, v, v, typ))
		}
	}
	for k := range d.Headers {
		if _, ok := h[k]; !ok && !d.Optional[k] {
			errs = append(errs, fmt.Errorf("%s is missing; the document puts it on every message", k))
		}
	}
	want := map[string]any{
		wire.ID: w.ID, wire.Attempt: w.Attempt, wire.Created: w.Created,
		wire.Exchange: w.Exchange, wire.RoutingKey: w.RoutingKey,
	}
	for k, v := range want {
		if got, ok := h[k]; ok && got != v && fmt.Sprintf("%T", got) == fmt.Sprintf("%T", v) { // a wrong type is said above
			errs = append(errs, fmt.Errorf("%s = %#v, want %#v", k, got, v))
		}
	}
	reason, given := h[wire.Error]
	switch {
	case given && !w.GivenUp:
		errs = append(errs, fmt.Errorf("x-acemq-error = %#v on a message not given up on", reason))
	case !given && w.GivenUp:
		errs = append(errs, errors.New("x-acemq-error is missing on a message given up on"))
	case given && !slices.ContainsFunc(d.Reasons, func(r *regexp.Regexp) bool { s, _ := reason.(string); return r.MatchString(s) }):
		errs = append(errs, fmt.Errorf("x-acemq-error = %#v is none of the documented reasons", reason))
	}
	return errors.Join(errs...)
}
