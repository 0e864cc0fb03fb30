package outbox

import (
	"fmt"

	"github.com/acemq/acemq/internal/pgident"
	"github.com/jackc/pgx/v5"
)

// maxTableLen leaves room for the longest suffix of a derived name
// ("_next_attempt_at_idx", 20 bytes) within PostgreSQL's 63.
const maxTableLen = 48

// inlineBody is the largest body the claim query returns inline; larger
// ones are read one at a time, within the batch's byte budget.
const inlineBody = 64 << 10

// maxStoredHeaders is the largest headers column the claim query returns,
// by its stored size (pg_column_size): a row's headers larger than that
// are refused unread, so that a batch of them cannot swamp the relay. It
// is far above any headers that fit in an AMQP frame (jsonb may take up
// to eight times its JSON text, for deep nesting), which the transport
// refuses as it measures them.
const maxStoredHeaders = 1 << 20

// batchBytes is a batch's budget of body bytes: a batch of large messages
// stops here (after at least one row) rather than hold them all in memory.
const batchBytes = 32 << 20

// queries is the SQL of one table, built once from a validated name.
type queries struct {
	create, insert, claim, body, remove, fail, stats string
	listen, channel                                  string
	keys                                             lockKeys // see awake.go
}

func newQueries(name pgident.Name) queries {
	t := name.Quoted()
	fn := name.Sibling("_notify")
	// The channel is the table's name as given: validated to [a-z0-9_.]
	// and at most 48+1+63 bytes, so it is safe inside a string literal; a
	// name longer than a channel may be is shortened to a stable prefix.
	channel := name.String()
	if len(channel) > pgident.MaxLen {
		channel = channel[:pgident.MaxLen]
	}
	q := queries{channel: channel, listen: "LISTEN " + pgx.Identifier{channel}.Sanitize(), keys: newLockKeys(channel)}
	w := fmt.Sprintf("%d, %d", q.keys.writingClass, q.keys.object)
	a := fmt.Sprintf("%d, %d", q.keys.awakeClass, q.keys.object)
	q.create = `CREATE TABLE IF NOT EXISTS ` + t + ` (
	seq             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id              text        NOT NULL,
	exchange        text        NOT NULL,
	routing_key     text        NOT NULL,
	headers         jsonb,
	content_type    text        NOT NULL DEFAULT '',
	correlation_id  text        NOT NULL DEFAULT '',
	body            bytea       NOT NULL,
	created_at      timestamptz NOT NULL DEFAULT now(),
	attempts        integer     NOT NULL DEFAULT 0,
	next_attempt_at timestamptz NOT NULL DEFAULT now(),
	last_error      text
);
CREATE INDEX IF NOT EXISTS ` + name.Local("_next_attempt_at_idx") + ` ON ` + t + ` (next_attempt_at);
CREATE OR REPLACE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $acemq$
BEGIN
	-- Notify only when no relay is awake (it holds the lock tested here);
	-- the lock taken first, held to this transaction's end, is what a
	-- relay that goes to sleep checks for. See outbox/awake.go.
	PERFORM pg_advisory_xact_lock_shared(` + w + `);
	IF pg_try_advisory_lock_shared(` + a + `) THEN
		PERFORM pg_advisory_unlock_shared(` + a + `);
		PERFORM pg_notify('` + channel + `', '');
	END IF;
	RETURN NULL;
END
$acemq$;
CREATE OR REPLACE TRIGGER ` + name.Local("_notify") + ` AFTER INSERT ON ` + t + `
	FOR EACH STATEMENT EXECUTE FUNCTION ` + fn + `();
`
	q.insert = `INSERT INTO ` + t + ` (id, exchange, routing_key, headers, content_type, correlation_id, body)
VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7)`
	// $1 batch size, $2 inline body limit, $3 headers limit. Rows that
	// are locked belong to another relay's batch: skip them rather than
	// wait. A NULL next_attempt_at (a table whose column drifted from
	// CreateTableSQL's NOT NULL, or a row another writer put in) is due:
	// read as "never", it would leave the row unpublished forever.
	q.claim = fmt.Sprintf(`SELECT seq, id, exchange, routing_key,
	CASE WHEN pg_column_size(headers) <= $3 THEN headers END, pg_column_size(headers), content_type, correlation_id,
	CASE WHEN octet_length(body) <= $2 THEN body END, octet_length(body), created_at, attempts
FROM %s
WHERE next_attempt_at <= now() OR next_attempt_at IS NULL
ORDER BY seq
LIMIT $1
FOR UPDATE SKIP LOCKED`, t)
	q.body = `SELECT body FROM ` + t + ` WHERE seq = $1`
	q.remove = `DELETE FROM ` + t + ` WHERE seq = ANY($1)`
	// $1 seqs, $2 errors, $3 delays in microseconds: the time of the retry
	// is counted from when the failure was recorded, not when the batch
	// began. attempts stops at the integer's maximum rather than fail the
	// whole batch's record on one row's overflow.
	q.fail = `UPDATE ` + t + ` AS o
SET attempts = least(coalesce(o.attempts, 0), 2147483646) + 1, last_error = f.err,
	next_attempt_at = clock_timestamp() + f.delay * interval '1 microsecond'
FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS f(seq, err, delay)
WHERE o.seq = f.seq`
	q.stats = `SELECT count(*), count(*) FILTER (WHERE attempts > 0),
	coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
FROM ` + t
	return q
}
