// Package pgident validates the table names acemq's PostgreSQL code builds
// SQL from, so that a name given by a user is either a plain identifier or
// an error, never text spliced into a statement.
package pgident

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// MaxLen is PostgreSQL's identifier length (NAMEDATALEN - 1): longer names
// are silently truncated by the server, so they are refused here instead.
const MaxLen = 63

var part = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Name is a validated table name, optionally schema-qualified.
type Name struct {
	Schema string // empty: the search_path decides
	Table  string
}

// Parse validates "table" or "schema.table": each part a lower-case
// identifier of letters, digits and underscores starting with a letter or
// underscore, the schema at most [MaxLen] bytes and the table at most
// maxTable bytes (callers keep room for the suffixes of derived names). The
// error says what is wrong but wraps nothing: callers wrap their own
// sentinel.
func Parse(name string, maxTable int) (Name, error) {
	schema, table, qualified := strings.Cut(name, ".")
	if !qualified {
		schema, table = "", name
	}
	if maxTable > MaxLen {
		maxTable = MaxLen
	}
	switch {
	case !part.MatchString(table) || len(table) > maxTable:
		return Name{}, fmt.Errorf("%q: want [schema.]table in lower-case letters, digits and _, the table at most %d bytes", name, maxTable)
	case qualified && (!part.MatchString(schema) || len(schema) > MaxLen):
		return Name{}, fmt.Errorf("%q: want the schema in lower-case letters, digits and _, at most %d bytes", name, MaxLen)
	}
	return Name{Schema: schema, Table: table}, nil
}

// String is the name as given: "table" or "schema.table".
func (n Name) String() string {
	if n.Schema == "" {
		return n.Table
	}
	return n.Schema + "." + n.Table
}

// Quoted is the name quoted for SQL.
func (n Name) Quoted() string {
	if n.Schema == "" {
		return pgx.Identifier{n.Table}.Sanitize()
	}
	return pgx.Identifier{n.Schema, n.Table}.Sanitize()
}

// Sibling is the quoted name of another object in the table's schema (a
// function): the table's name with suffix appended. Callers pass a maxTable
// to Parse that leaves room for their longest suffix.
func (n Name) Sibling(suffix string) string {
	if n.Schema == "" {
		return pgx.Identifier{n.Table + suffix}.Sanitize()
	}
	return pgx.Identifier{n.Schema, n.Table + suffix}.Sanitize()
}

// Local is the quoted, unqualified name of an object that lives in the
// table's schema by definition (an index, a trigger): the table's name with
// suffix appended.
func (n Name) Local(suffix string) string { return pgx.Identifier{n.Table + suffix}.Sanitize() }
