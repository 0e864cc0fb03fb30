package outbox

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// row is one claimed outbox row.
type row struct {
	seq           int64
	id            string
	exchange, key string
	headers       []byte
	contentType   string
	correlationID string
	body          []byte
	size          int64
	created       time.Time
	attempts      int32
	// bad says why the row cannot be published as it stands, found as it
	// was read; the row is recorded as failed without a publish.
	bad error
}

// scanned is a claimed row as the claim query returns it, every column
// nullable. The table's types are fixed, but not every value it allows can
// be published (created_at 'infinity'), nor is every table still as
// CreateTableSQL made it (a NOT NULL dropped by hand): such a row is found
// here, as that row's error, instead of failing the scan of the whole
// claim on every try, with the good rows behind it never published.
type scanned struct {
	seq                                           int64
	id, exchange, key, contentType, correlationID pgtype.Text
	headers                                       []byte
	headersSize                                   pgtype.Int8
	body                                          []byte
	size                                          pgtype.Int8
	created                                       pgtype.Timestamptz
	attempts                                      pgtype.Int8
}

func (s *scanned) dest() []any {
	return []any{&s.seq, &s.id, &s.exchange, &s.key, &s.headers, &s.headersSize, &s.contentType, &s.correlationID,
		&s.body, &s.size, &s.created, &s.attempts}
}

// row is s as the relay publishes it, with bad set when a column holds
// what no message can be made of. NULL content_type and correlation_id
// are empty, and NULL attempts none, as their defaults say.
func (s *scanned) row(maxBody int) row {
	x := row{
		seq: s.seq, id: s.id.String, exchange: s.exchange.String, key: s.key.String, headers: s.headers,
		contentType: s.contentType.String, correlationID: s.correlationID.String,
		body: s.body, size: s.size.Int64, created: s.created.Time,
		attempts: int32(max(min(s.attempts.Int64, math.MaxInt32), math.MinInt32)),
	}
	for _, c := range [...]struct {
		name  string
		valid bool
	}{{"id", s.id.Valid}, {"exchange", s.exchange.Valid}, {"routing_key", s.key.Valid}, {"body", s.size.Valid}, {"created_at", s.created.Valid}} {
		if !c.valid {
			x.bad = fmt.Errorf("%w: the %s column is NULL", ErrInvalidMessage, c.name)
			return x
		}
	}
	switch {
	case x.id == "":
		x.bad = fmt.Errorf("%w: the id column is empty; a message needs an id for its duplicates to be known", ErrInvalidMessage)
	case s.created.InfinityModifier != pgtype.Finite:
		x.bad = fmt.Errorf("%w: the created_at column is %s; a message needs the time it was written", ErrInvalidMessage, s.created.InfinityModifier)
	case x.size > int64(maxBody):
		x.bad = fmt.Errorf("%w: the body is %d bytes, more than the %d this outbox accepts", ErrTooLarge, x.size, maxBody)
	case s.headersSize.Valid && s.headers == nil:
		x.bad = fmt.Errorf("%w: the headers column takes %d bytes; headers that large cannot fit in an AMQP frame", ErrTooLarge, s.headersSize.Int64)
	}
	return x
}

// publishing is what x is published as: the wire contract's new message,
// with the row's headers. A row that Write would have refused (another
// writer's, or hand-written SQL) is an error saying what is wrong with it.
// It is what the relay does with a row between the claim and the
// transport, and never panics, whatever the row holds (FuzzRelayRow).
func publishing(x *row) (transport.Publishing, error) {
	if x.bad != nil {
		return transport.Publishing{}, x.bad
	}
	for _, f := range [...]struct{ column, v string }{
		{"the exchange column", x.exchange}, {"the routing_key column", x.key},
		{"the content_type column", x.contentType}, {"the correlation_id column", x.correlationID},
	} {
		if err := shortStr(f.column, f.v); err != nil {
			return transport.Publishing{}, err
		}
	}
	headers, err := decodeHeaders(x.headers)
	if err != nil {
		return transport.Publishing{}, err
	}
	// Attempt 1 always: a relay's retry is not a delivery attempt.
	return wire.New(wire.Origin{ID: x.id, Created: x.created, Exchange: x.exchange, RoutingKey: x.key},
		headers, transport.Properties{ContentType: x.contentType, CorrelationID: x.correlationID}, x.body), nil
}

// maxLastError bounds the last_error written for a row: an error may
// quote what the row holds.
const maxLastError = 2048

// lastError is err as the last_error column can always store it: valid
// UTF-8 with no NUL, in ASCII where it had to be mended (the database's
// encoding may not be UTF-8), and at most maxLastError bytes. One error it
// could not store would fail the record of the whole batch, and every
// message in it would be published again, on every try.
func lastError(err error) string {
	s := err.Error()
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "?"), "\x00", `\x00`)
	if len(s) > maxLastError {
		cut := maxLastError - 3
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
