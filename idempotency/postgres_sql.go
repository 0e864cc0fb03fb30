package idempotency

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DefaultTable is the [Postgres] store's table unless [WithTable] names
// another.
const DefaultTable = "acemq_idempotency"

// ErrInvalidTable is returned, wrapped, by [NewPostgres] for a table name
// that is not a plain lower-case identifier, optionally schema-qualified.
var ErrInvalidTable = errors.New("acemq: invalid idempotency table name")

// The table part is shorter than PostgreSQL's 63 bytes so that the index
// names built from it are never truncated into each other.
var (
	schemaPart = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	tablePart  = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)
)

// queries is the SQL of one table, built once from a validated name.
// Durations are passed in microseconds; the clock is a timestamptz
// parameter that is NULL unless [WithClock] was given, when the database's
// now() is used.
type queries struct {
	create, claim, claimTx, state, leaseLeft, confirm, release, cleanup string
}

func newQueries(name string) (queries, error) {
	schema, table, qualified := strings.Cut(name, ".")
	if !qualified {
		schema, table = "", name
	}
	if !tablePart.MatchString(table) || (qualified && !schemaPart.MatchString(schema)) {
		return queries{}, fmt.Errorf("%w: %q (want [schema.]table in lower-case letters, digits and _, the table at most 48 long)", ErrInvalidTable, name)
	}
	ident := pgx.Identifier{table}
	if qualified {
		ident = pgx.Identifier{schema, table}
	}
	t := ident.Sanitize()
	leaseIdx := pgx.Identifier{table + "_lease_until_idx"}.Sanitize()
	confirmedIdx := pgx.Identifier{table + "_confirmed_at_idx"}.Sanitize()

	// In claim, claimTx and confirm: $1 id, $2 clock, $3 retention; in
	// claim, $4 lease and $5 owner. A row is claimable again once its lease
	// has ended or its retention has passed; excluded.claimed_at is the
	// time of the new claim. A claim takes the row's owner with it: claimTx
	// clears it, since its row is confirmed and no one's to release.
	const claimable = `
WHERE (c.confirmed_at IS NULL AND c.lease_until <= excluded.claimed_at)
   OR c.confirmed_at <= excluded.claimed_at - $3::bigint * interval '1 microsecond'
RETURNING true`
	return queries{
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	id           text        PRIMARY KEY,
	claimed_at   timestamptz NOT NULL,
	lease_until  timestamptz,
	confirmed_at timestamptz,
	owner        text,
	CHECK ((lease_until IS NULL) <> (confirmed_at IS NULL))
);
ALTER TABLE ` + t + ` ADD COLUMN IF NOT EXISTS owner text;
CREATE INDEX IF NOT EXISTS ` + leaseIdx + ` ON ` + t + ` (lease_until) WHERE lease_until IS NOT NULL;
CREATE INDEX IF NOT EXISTS ` + confirmedIdx + ` ON ` + t + ` (confirmed_at);
`,
		claim: `INSERT INTO ` + t + ` AS c (id, claimed_at, lease_until, owner)
VALUES ($1, ` + clock(2) + `, ` + clock(2) + ` + $4::bigint * interval '1 microsecond', $5)
ON CONFLICT (id) DO UPDATE SET claimed_at = excluded.claimed_at, lease_until = excluded.lease_until, confirmed_at = NULL,
	owner = excluded.owner` + claimable,
		claimTx: `INSERT INTO ` + t + ` AS c (id, claimed_at, confirmed_at)
VALUES ($1, ` + clock(2) + `, ` + clock(2) + `)
ON CONFLICT (id) DO UPDATE SET claimed_at = excluded.claimed_at, lease_until = NULL, confirmed_at = excluded.confirmed_at,
	owner = NULL` + claimable,
		// $1 id, $2 clock, $3 retention: the row that refused a claim, as
		// (confirmed, holds). holds is the negation of claimable above (the
		// CHECK makes exactly one of lease_until and confirmed_at set); a
		// row that no longer holds, or is gone, changed after the claim.
		state: `SELECT confirmed_at IS NOT NULL,
	coalesce(lease_until > ` + clock(2) + `, confirmed_at > ` + clock(2) + ` - $3::bigint * interval '1 microsecond')
FROM ` + t + ` WHERE id = $1`,
		// $1 id, $2 clock: the microseconds left of an unconfirmed
		// claim's lease, computed by the database so that no process's
		// clock is compared with another's; no row, or one whose lease
		// ended, holds nothing.
		leaseLeft: `SELECT (extract(epoch FROM lease_until - ` + clock(2) + `) * 1000000)::bigint
FROM ` + t + ` WHERE id = $1 AND confirmed_at IS NULL AND lease_until > ` + clock(2),
		confirm: `INSERT INTO ` + t + ` (id, claimed_at, confirmed_at)
VALUES ($1, ` + clock(2) + `, ` + clock(2) + `)
ON CONFLICT (id) DO UPDATE SET lease_until = NULL, confirmed_at = excluded.confirmed_at`,
		// $1 id, $2 owner: only a claim that is still this store's goes.
		release: `DELETE FROM ` + t + ` WHERE id = $1 AND confirmed_at IS NULL AND owner = $2`,
		// $1 clock, $2 retention.
		cleanup: `DELETE FROM ` + t + `
WHERE lease_until <= ` + clock(1) + `
   OR confirmed_at <= ` + clock(1) + ` - $2::bigint * interval '1 microsecond'`,
	}, nil
}

// clock is the time of a statement: parameter n, or the database's now().
func clock(n int) string { return fmt.Sprintf("coalesce($%d::timestamptz, now())", n) }
